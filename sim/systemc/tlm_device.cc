// TlmDevice: the driver over TLM-2.0 sockets (tlm_device.h).
#include "sim/systemc/tlm_device.h"

#include <sstream>

#include "tessera/isa_gen.h"

namespace tessera::systemc {

using sc_core::sc_time;
using sc_core::SC_ZERO_TIME;

TlmDevice::TlmDevice(const driver::DeviceConfig& config, tlm::tlm_initiator_socket<>& csr,
                     tlm::tlm_initiator_socket<>& hbm, sc_core::sc_in<bool>& irq, TimingMode mode,
                     sc_time clock_period)
    : Device(config), csr_(csr), hbm_(hbm), irq_(irq), mode_(mode), period_(clock_period) {
  config_.backend = driver::Backend::kRtl;  // the cycle-accurate chip, through the platform
  qk_.reset();
}

void TlmDevice::sync() {
  if (mode_ == TimingMode::kLooselyTimed) qk_.sync();
}

void TlmDevice::transport(tlm::tlm_initiator_socket<>& socket, tlm::tlm_command cmd, uint64_t addr,
                          uint8_t* data, size_t bytes) {
  tlm::tlm_generic_payload t;
  t.set_command(cmd);
  t.set_address(addr);
  t.set_data_ptr(data);
  t.set_data_length(static_cast<unsigned int>(bytes));
  t.set_streaming_width(static_cast<unsigned int>(bytes));
  t.set_byte_enable_ptr(nullptr);
  t.set_dmi_allowed(false);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_time delay = mode_ == TimingMode::kLooselyTimed ? qk_.get_local_time() : SC_ZERO_TIME;
  socket->b_transport(t, delay);
  if (mode_ == TimingMode::kLooselyTimed) {
    qk_.set(delay);
    if (qk_.need_sync()) qk_.sync();
  } else if (delay > SC_ZERO_TIME) {
    sc_core::wait(delay);
  }
  if (!t.is_response_ok()) {
    std::ostringstream s;
    s << "TLM " << (cmd == tlm::TLM_WRITE_COMMAND ? "write" : "read") << " of " << bytes
      << " byte(s) at 0x" << std::hex << addr << " on the " << (&socket == &csr_ ? "CSR" : "HBM")
      << " socket: " << t.get_response_string();
    throw std::runtime_error(s.str());
  }
}

void TlmDevice::write(uint64_t addr, const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return;
  std::vector<uint8_t> buf(bytes);  // the payload's pointer is not const
  transport(hbm_, tlm::TLM_WRITE_COMMAND, addr, buf.data(), buf.size());
}

std::vector<uint8_t> TlmDevice::read(uint64_t addr, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes) transport(hbm_, tlm::TLM_READ_COMMAND, addr, out.data(), bytes);
  return out;
}

uint32_t TlmDevice::csr_read(uint32_t offset) {
  uint32_t v = 0;
  transport(csr_, tlm::TLM_READ_COMMAND, offset, reinterpret_cast<uint8_t*>(&v), 4);
  return v;
}

void TlmDevice::csr_write(uint32_t offset, uint32_t value) {
  transport(csr_, tlm::TLM_WRITE_COMMAND, offset, reinterpret_cast<uint8_t*>(&value), 4);
}

driver::RunReport TlmDevice::run(uint64_t prog_addr, uint64_t timeout) {
  constexpr uint32_t kDoneAndFault = 3;
  if (!irq_enabled_) {
    csr_write(isa::CSR_IRQ_ENABLE, kDoneAndFault);
    irq_enabled_ = true;
  }
  csr_write(isa::CSR_IRQ_PENDING, kDoneAndFault);  // W1C what an earlier run left
  csr_write(isa::CSR_PROG_ADDR, static_cast<uint32_t>(prog_addr));
  csr_write(isa::CSR_DOORBELL, 1);
  sync();
  const sc_time deadline = sc_core::sc_time_stamp() + period_ * static_cast<double>(timeout);
  uint32_t status;
  for (;;) {
    status = csr_read(isa::CSR_STATUS);
    if (status != isa::STATUS_RUNNING) break;
    sync();
    const sc_time now = sc_core::sc_time_stamp();
    if (now >= deadline) throw driver::DeviceTimeout(hang_report(timeout));
    // (Loosely timed, the line may have risen while the sync above waited: read it first.)
    if (!irq_->read()) sc_core::wait(deadline - now, irq_->posedge_event());
  }
  csr_write(isa::CSR_IRQ_PENDING, kDoneAndFault);
  driver::RunReport rep;
  for (int i = 0; i < driver::kPerfCounters; ++i) {
    rep.perf[i] = uint64_t{csr_read(isa::CSR_PERF_BASE + 8 * i)} |
                  uint64_t{csr_read(isa::CSR_PERF_BASE + 8 * i + 4)} << 32;
  }
  rep.cycles = rep.perf[isa::PERF_CYCLES];
  if (status == isa::STATUS_FAULTED) throw_fault(rep.cycles);
  return rep;
}

}  // namespace tessera::systemc
