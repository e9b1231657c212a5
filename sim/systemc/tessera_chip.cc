// TesseraChip: the SystemC/TLM-2.0 wrapper of the verilated chip (tessera_chip.h).
#include "sim/systemc/tessera_chip.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "tessera/isa_gen.h"

namespace tessera::systemc {

using sc_core::sc_time;
using sc_core::SC_ZERO_TIME;

const char* timing_mode_name(TimingMode m) { return m == TimingMode::kLooselyTimed ? "lt" : "at"; }
TimingMode parse_timing_mode(const std::string& name) {
  if (name == "lt") return TimingMode::kLooselyTimed;
  if (name == "at") return TimingMode::kApproximatelyTimed;
  throw std::invalid_argument("unknown timing mode '" + name + "' (expected lt or at)");
}

namespace {

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

std::string describe(const tlm::tlm_generic_payload& t) {
  std::ostringstream s;
  s << (t.is_write() ? "write" : "read") << " of " << t.get_data_length() << " byte(s) at "
    << hex(t.get_address());
  return s.str();
}

// Byte i of the transaction is enabled (the byte-enable array repeats over the data).
bool enabled(const tlm::tlm_generic_payload& t, size_t i) {
  const unsigned char* be = t.get_byte_enable_ptr();
  if (!be) return true;
  return be[i % t.get_byte_enable_length()] == TLM_BYTE_ENABLED;
}

}  // namespace

TesseraChip::TesseraChip(sc_core::sc_module_name name, const ChipConfig& config)
    : sc_module(name),
      csr_socket("csr_socket"),
      hbm_socket("hbm_socket"),
      clk("clk"),
      irq("irq"),
      config_(config),
      core_(ChipCore::make(config.device, config.wave_name)) {
  cycle0_ = core_->cycle();
  csr_socket.register_b_transport(this, &TesseraChip::csr_b_transport);
  hbm_socket.register_b_transport(this, &TesseraChip::hbm_b_transport);
  hbm_socket.register_transport_dbg(this, &TesseraChip::hbm_transport_dbg);
  if (config_.clock_period <= SC_ZERO_TIME || config_.quantum <= SC_ZERO_TIME)
    throw std::invalid_argument("TesseraChip: the clock period and the quantum must be positive");
  SC_HAS_PROCESS(TesseraChip);
  SC_METHOD(write_irq);
  sensitive << irq_changed_;
  dont_initialize();
  if (config_.mode == TimingMode::kApproximatelyTimed) {
    // A transaction's cycles run in the initiator's thread, each on its own rising edge, which
    // on_clock hands over instead of stepping the chip itself.
    core_->set_cycle_gate([this] {
      if (busy_) sc_core::wait(edge_);
    });
  } else {
    SC_THREAD(lt_thread);
  }
}

TesseraChip::~TesseraChip() = default;

void TesseraChip::end_of_elaboration() {
  if (config_.mode != TimingMode::kApproximatelyTimed) return;
  if (clk.size() == 0) {
    SC_REPORT_ERROR("tessera/TesseraChip",
                    (std::string(name()) + ": approximately-timed mode needs clk bound").c_str());
    return;
  }
  if (const auto* c = dynamic_cast<const sc_core::sc_clock*>(clk.get_interface(0))) {
    if (c->period() != config_.clock_period) {
      SC_REPORT_ERROR("tessera/TesseraChip",
                      (std::string(name()) + ": clk's period " + c->period().to_string() +
                       " is not the configured " + config_.clock_period.to_string())
                          .c_str());
    }
  }
  sc_core::sc_spawn_options o;
  o.spawn_method();
  o.dont_initialize();
  o.set_sensitivity(&clk->posedge_event());
  sc_core::sc_spawn(sc_bind(&TesseraChip::on_clock, this), sc_core::sc_gen_unique_name("clock"),
                    &o);
}

void TesseraChip::on_clock() {
  if (!broken_.empty()) return;
  if (busy_) {
    edge_.notify();  // the transaction in progress runs this cycle
  } else {
    try {
      core_->step();
    } catch (const std::exception& e) {
      stop(e.what());
      return;
    }
  }
  sync_irq();
}

void TesseraChip::lt_thread() {
  for (;;) {
    sc_core::wait(config_.quantum);
    if (!broken_.empty()) continue;
    try {
      catch_up(sc_core::sc_time_stamp());
    } catch (const std::exception& e) {
      stop(e.what());
      continue;
    }
    sync_irq();
  }
}

void TesseraChip::stop(const std::string& why) {
  broken_ = "the chip model stopped at cycle " + std::to_string(cycles()) + ": " + why;
  errors_.push_back(std::string(name()) + ": " + broken_);
  SC_REPORT_WARNING("tessera/TesseraChip", errors_.back().c_str());
}

void TesseraChip::perform(tlm::tlm_generic_payload& t, sc_time& delay, const char* socket,
                          const std::function<void()>& body) {
  if (!broken_.empty()) {
    reject(t, tlm::TLM_GENERIC_ERROR_RESPONSE,
           std::string(socket) + " socket: " + describe(t) + ": " + broken_);
    return;
  }
  // Whatever leaves this function — a return, an error response, SystemC unwinding a killed
  // or reset initiator thread — ends the access (AT: releases the host ports to others).
  struct EndAccess {
    TesseraChip* chip;
    sc_time& delay;
    bool begun = false;
    ~EndAccess() {
      if (begun) chip->end_access(delay);
    }
  } end{this, delay};
  try {
    begin_access(delay);
    end.begun = true;
    body();
    t.set_response_status(tlm::TLM_OK_RESPONSE);
  } catch (const sc_core::sc_unwind_exception&) {
    throw;  // a kill or reset of the initiator: must propagate
  } catch (const std::exception& e) {
    // The RTL or the HBM model failed (a timing violation, a stuck port: a chip bug). The
    // model's state is undefined from here: the chip stops, later transactions are refused.
    stop(e.what());
    reject(t, tlm::TLM_GENERIC_ERROR_RESPONSE,
           std::string(socket) + " socket: " + describe(t) + ": " + e.what());
  }
}

void TesseraChip::sync_irq() {
  const bool level = core_->irq();
  if (level != irq_level_) {
    irq_level_ = level;
    irq_changed_.notify(SC_ZERO_TIME);
  }
}

void TesseraChip::write_irq() { irq.write(irq_level_); }

void TesseraChip::catch_up(const sc_time& t) {
  while (chip_time() < t) core_->step();
}

void TesseraChip::begin_access(sc_time& delay) {
  if (config_.mode == TimingMode::kApproximatelyTimed) {
    sc_core::wait(delay);  // the access starts at its annotated time
    delay = SC_ZERO_TIME;
    while (busy_) sc_core::wait(idle_);
    busy_ = true;
  } else {
    catch_up(sc_core::sc_time_stamp() + delay);
  }
}

void TesseraChip::end_access(sc_time& delay) {
  if (config_.mode == TimingMode::kApproximatelyTimed) {
    busy_ = false;
    idle_.notify();
  } else {
    const sc_time now = sc_core::sc_time_stamp();
    delay = chip_time() > now ? chip_time() - now : SC_ZERO_TIME;
  }
  sync_irq();
}

void TesseraChip::reject(tlm::tlm_generic_payload& t, tlm::tlm_response_status status,
                         const std::string& why) {
  t.set_response_status(status);
  std::string msg = std::string(name()) + ": " + why + " -> " + t.get_response_string();
  errors_.push_back(msg);
  SC_REPORT_WARNING("tessera/TesseraChip", msg.c_str());
}

bool TesseraChip::check(tlm::tlm_generic_payload& t, const char* socket) {
  if (t.get_command() == tlm::TLM_IGNORE_COMMAND) {
    t.set_response_status(tlm::TLM_OK_RESPONSE);
    return false;
  }
  if (t.get_data_length() == 0 || t.get_data_ptr() == nullptr) {
    reject(t, tlm::TLM_BURST_ERROR_RESPONSE,
           std::string(socket) + " socket: " + describe(t) + " carries no data");
    return false;
  }
  if (t.get_streaming_width() < t.get_data_length()) {
    reject(t, tlm::TLM_BURST_ERROR_RESPONSE,
           std::string(socket) + " socket: " + describe(t) + " with streaming width " +
               std::to_string(t.get_streaming_width()) + ": streaming is not supported");
    return false;
  }
  if (t.get_byte_enable_ptr() && t.get_byte_enable_length() == 0) {
    reject(t, tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE,
           std::string(socket) + " socket: " + describe(t) + " with an empty byte-enable array");
    return false;
  }
  return true;
}

void TesseraChip::csr_b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
  if (!check(t, "csr")) return;
  const uint64_t a = t.get_address();
  if (a >= kCsrMapBytes) {
    reject(t, tlm::TLM_ADDRESS_ERROR_RESPONSE,
           "csr socket: " + describe(t) + " is outside the CSR map (0x000 .. " +
               hex(kCsrMapBytes - 1) + ")");
    return;
  }
  if (t.get_data_length() != 4 || a % 4 != 0) {
    reject(t, tlm::TLM_BURST_ERROR_RESPONSE,
           "csr socket: " + describe(t) + ": CSRs are 32-bit registers at 4-byte aligned offsets");
    return;
  }
  for (size_t i = 0; i < 4; ++i) {
    if (!enabled(t, i)) {
      reject(t, tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE,
             "csr socket: " + describe(t) + " with byte " + std::to_string(i) +
                 " disabled: CSRs are written and read whole");
      return;
    }
  }
  perform(t, delay, "csr", [&] {
    uint32_t v = 0;
    if (t.is_write()) {
      std::memcpy(&v, t.get_data_ptr(), 4);
      if (a == isa::CSR_DOORBELL && (v & 1) && config_.align_doorbell)
        core_->idle_to_doorbell_phase();
      core_->csr_write(static_cast<uint32_t>(a), v);
    } else {
      v = core_->csr_read(static_cast<uint32_t>(a));
      std::memcpy(t.get_data_ptr(), &v, 4);
    }
  });
}

void TesseraChip::hbm_b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
  if (!check(t, "hbm")) return;
  const uint64_t a = t.get_address(), n = t.get_data_length();
  if (a >= hbm_bytes() || n > hbm_bytes() - a) {
    reject(t, tlm::TLM_ADDRESS_ERROR_RESPONSE,
           "hbm socket: " + describe(t) + " is outside HBM (0x0 .. " + hex(hbm_bytes() - 1) + ")");
    return;
  }
  // The host port moves whole 32-byte bursts; the bytes outside [a, a + n) and the disabled
  // ones are masked by the write strobes (writes) or not copied (reads).
  const uint64_t lo = a / 32 * 32, hi = (a + n + 31) / 32 * 32;
  unsigned char* data = t.get_data_ptr();
  perform(t, delay, "hbm", [&] {
    if (t.is_write()) {
      std::vector<uint8_t> buf(hi - lo, 0), en(hi - lo, 0);
      for (uint64_t i = 0; i < n; ++i) {
        buf[a - lo + i] = data[i];
        en[a - lo + i] = enabled(t, i) ? 1 : 0;
      }
      core_->hbm_write(lo, buf, &en);
    } else {
      const std::vector<uint8_t> buf = core_->hbm_read(lo, hi - lo);
      for (uint64_t i = 0; i < n; ++i)
        if (enabled(t, i)) data[i] = buf[a - lo + i];
    }
  });
}

unsigned int TesseraChip::hbm_transport_dbg(tlm::tlm_generic_payload& t) {
  const uint64_t a = t.get_address();
  if (a >= hbm_bytes()) return 0;
  const uint64_t n = std::min<uint64_t>(t.get_data_length(), hbm_bytes() - a);
  unsigned char* data = t.get_data_ptr();
  if (!data) return 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (t.is_write()) {
      core_->poke(a + i, data[i]);
    } else if (t.is_read()) {
      data[i] = core_->peek(a + i);
    }
  }
  return t.get_command() == tlm::TLM_IGNORE_COMMAND ? 0 : static_cast<unsigned int>(n);
}

}  // namespace tessera::systemc
