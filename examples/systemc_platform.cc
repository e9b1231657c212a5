// Tessera in a SystemC model of your own (docs/systemc.md walks through this file).
//
// A system of four TLM-2.0 modules, connected socket to socket:
//
//   TrafficGenerator ──► Router ──► 0x0000_0000  Memory (1 MiB, the system's DRAM)
//     (the host CPU)        │   └─► 0x4000_0000  Tessera CSRs  (chip.csr_socket)
//        ▲ irq              └───► 0x8000_0000  Tessera HBM   (chip.hbm_socket)
//        └──────────────────────── chip.irq
//
// The generator puts a matrix A (8 x 4) and weights W (4 x 4) in the system memory, copies them
// into the chip's HBM over the bus, writes a program (C = relu(A x W) on the MXU and the VPU),
// rings the doorbell, sleeps until the chip's interrupt, copies C back into system memory and
// checks it against the same arithmetic on the host (bf16 products, fp32 sums in the array's
// order, relu). Exit code 0 when every element matches.
//
//   build/bin/systemc_example [at|lt]     (at: clocked chip, the default; lt: temporally decoupled)
// The TLM utilities need SystemC's declarations first.
// clang-format off
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>
// clang-format on

#include <cstdio>
#include <cstring>
#include <vector>

#include "sim/systemc/tessera_chip.h"
#include "tessera/asm.h"
#include "tessera/isa_gen.h"

using namespace sc_core;

// The system's memory: a byte array with a fixed access latency.
struct Memory : sc_module {
  tlm_utils::simple_target_socket<Memory> socket{"socket"};
  std::vector<unsigned char> bytes = std::vector<unsigned char>(1 << 20);

  explicit Memory(sc_module_name n) : sc_module(n) {
    socket.register_b_transport(this, &Memory::b_transport);
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
    const uint64_t a = t.get_address();
    if (a + t.get_data_length() > bytes.size()) {
      t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    if (t.is_write()) std::memcpy(&bytes[a], t.get_data_ptr(), t.get_data_length());
    if (t.is_read()) std::memcpy(t.get_data_ptr(), &bytes[a], t.get_data_length());
    delay += sc_time(20, SC_NS);
    t.set_response_status(tlm::TLM_OK_RESPONSE);
  }
};

// An address decoder: forwards each transaction to the target whose window holds it, with the
// address made window-relative.
struct Router : sc_module {
  struct Window {
    uint64_t base, size;
  };
  tlm_utils::simple_target_socket<Router> in{"in"};
  tlm_utils::simple_initiator_socket<Router> out[3] = {
      tlm_utils::simple_initiator_socket<Router>("to_memory"),
      tlm_utils::simple_initiator_socket<Router>("to_csr"),
      tlm_utils::simple_initiator_socket<Router>("to_hbm")};
  Window windows[3] = {{0x0000'0000, 1 << 20}, {0x4000'0000, 0x1000}, {0x8000'0000, 1u << 28}};

  explicit Router(sc_module_name n) : sc_module(n) {
    in.register_b_transport(this, &Router::b_transport);
    in.register_transport_dbg(this, &Router::transport_dbg);
  }
  int decode(tlm::tlm_generic_payload& t) {
    for (int i = 0; i < 3; ++i) {
      const uint64_t a = t.get_address();
      if (a >= windows[i].base && a - windows[i].base < windows[i].size) {
        t.set_address(a - windows[i].base);
        return i;
      }
    }
    return -1;
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
    const uint64_t a = t.get_address();
    const int i = decode(t);
    if (i < 0) {
      t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    out[i]->b_transport(t, delay);
    t.set_address(a);
  }
  unsigned int transport_dbg(tlm::tlm_generic_payload& t) {
    const int i = decode(t);
    return i < 0 ? 0 : out[i]->transport_dbg(t);
  }
};

// The host CPU: moves data, programs the chip, waits for its interrupt.
struct TrafficGenerator : sc_module {
  static constexpr uint64_t kMem = 0x0000'0000, kCsr = 0x4000'0000, kHbm = 0x8000'0000;
  tlm_utils::simple_initiator_socket<TrafficGenerator> socket{"socket"};
  sc_in<bool> irq{"irq"};
  int mismatches = -1;

  explicit TrafficGenerator(sc_module_name n) : sc_module(n) {
    SC_HAS_PROCESS(TrafficGenerator);
    SC_THREAD(run);
  }

  void access(tlm::tlm_command cmd, uint64_t addr, void* data, unsigned len) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(static_cast<unsigned char*>(data));
    t.set_data_length(len);
    t.set_streaming_width(len);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = SC_ZERO_TIME;
    socket->b_transport(t, delay);
    wait(delay);  // this initiator keeps no local time: it waits out what each access took
    if (!t.is_response_ok())
      SC_REPORT_FATAL("generator",
                      (t.get_response_string() + " at address " + std::to_string(addr)).c_str());
  }
  void write32(uint64_t addr, uint32_t v) { access(tlm::TLM_WRITE_COMMAND, addr, &v, 4); }
  uint32_t read32(uint64_t addr) {
    uint32_t v = 0;
    access(tlm::TLM_READ_COMMAND, addr, &v, 4);
    return v;
  }
  // Memory to memory over the bus, through the generator (no DMA in this little system).
  void copy(uint64_t dst, uint64_t src, unsigned len) {
    std::vector<unsigned char> buf(len);
    access(tlm::TLM_READ_COMMAND, src, buf.data(), len);
    access(tlm::TLM_WRITE_COMMAND, dst, buf.data(), len);
  }

  static uint16_t bf16(float f) {  // the test values below are exact in bf16
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  }
  static float from_bf16(uint16_t h) {
    const uint32_t u = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }

  void run() {
    // A (8 x 4) at memory 0x1000, W (4 x 4) at 0x2000, as bf16.
    uint16_t A[8][4], W[4][4];
    for (int m = 0; m < 8; ++m)
      for (int k = 0; k < 4; ++k)
        A[m][k] = bf16(0.25f * static_cast<float>((m * 7 + k * 3) % 9 - 4));
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) W[k][j] = bf16(0.5f * static_cast<float>((k * 5 + j) % 7 - 3));
    access(tlm::TLM_WRITE_COMMAND, kMem + 0x1000, A, sizeof A);
    access(tlm::TLM_WRITE_COMMAND, kMem + 0x2000, W, sizeof W);

    // The chip's HBM: A at 0x10000, W at 0x11000, C (8 x 4 fp32) to 0x13000, program at 0x20000.
    copy(kHbm + 0x10000, kMem + 0x1000, sizeof A);
    copy(kHbm + 0x11000, kMem + 0x2000, sizeof W);
    std::string text =
        "dma.loop src, 0, 32, 2, 1, 0\ndma.loop dst, 0, 32, 2, 1, 0\n"
        "dma.copy hbm, ub, 2, 0x10000, 0x0\n"  // A -> UB 0x000
        "dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
        "dma.copy hbm, ub, 2, 0x11000, 0x100\n"  // W -> UB 0x100
        "signal dma, sc0\nwait mxu, sc0, 1\n"
        "mxu.ldw 0x100, 8\nmxu.mm set, 0x0, 8, 8, 0\n"  // ACC rows 0..7 = A x W
        "signal mxu, sc1\nwait vpu, sc1, 1\n";
    for (int r = 0; r < 8; ++r) {
      text += "vpu.ld acc, v1, " + std::to_string(r) + "\nvpu.op max, v2, v1, v0, v0\n" +
              "vpu.st f32, v2, " + std::to_string(0x400 + 16 * r) + "\n";
    }
    text +=
        "signal vpu, sc2\nwait dma, sc2, 1\n"
        "dma.loop src, 0, 32, 4, 1, 0\ndma.loop dst, 0, 32, 4, 1, 0\n"
        "dma.copy ub, hbm, 4, 0x400, 0x13000\nhalt\n";
    const auto program = tessera::assembler::assemble(text, {4});
    if (!program.ok()) SC_REPORT_FATAL("generator", "the program does not assemble");
    std::vector<uint8_t> image = program.bytes();
    access(tlm::TLM_WRITE_COMMAND, kHbm + 0x20000, image.data(),
           static_cast<unsigned>(image.size()));

    // Start it and sleep until the done (or fault) interrupt.
    write32(kCsr + tessera::isa::CSR_IRQ_ENABLE, 3);
    write32(kCsr + tessera::isa::CSR_PROG_ADDR, 0x20000);
    write32(kCsr + tessera::isa::CSR_DOORBELL, 1);
    const sc_time started = sc_time_stamp();
    while (!irq.read()) wait(irq.posedge_event());
    const uint32_t status = read32(kCsr + tessera::isa::CSR_STATUS);
    write32(kCsr + tessera::isa::CSR_IRQ_PENDING, 3);
    std::printf("interrupt after %s: STATUS %u, %u chip cycles (PERF[0]), %u MACs\n",
                (sc_time_stamp() - started).to_string().c_str(), status,
                read32(kCsr + tessera::isa::CSR_PERF_BASE),
                read32(kCsr + tessera::isa::CSR_PERF_BASE + 8 * 7));

    // C back into system memory at 0x3000, then checked against the host's arithmetic.
    copy(kMem + 0x3000, kHbm + 0x13000, 8 * 4 * 4);
    float C[8][4];
    access(tlm::TLM_READ_COMMAND, kMem + 0x3000, C, sizeof C);
    mismatches = status == tessera::isa::STATUS_HALTED ? 0 : 32;
    for (int m = 0; m < 8; ++m) {
      for (int j = 0; j < 4; ++j) {
        float acc = 0.0f;  // the array's order: k = 0, 1, 2, 3; bf16 products are exact in fp32
        for (int k = 0; k < 4; ++k) acc = acc + from_bf16(A[m][k]) * from_bf16(W[k][j]);
        const float want = acc > 0.0f ? acc : 0.0f;
        if (std::memcmp(&want, &C[m][j], 4) != 0) {
          std::printf("C[%d][%d] = %g, expected %g\n", m, j, C[m][j], want);
          ++mismatches;
        }
      }
    }
    std::printf("C = relu(A x W): %s (%d mismatches)\n", mismatches ? "WRONG" : "correct",
                mismatches);
    sc_stop();
  }
};

int sc_main(int argc, char** argv) {
  tessera::systemc::ChipConfig config;  // N = 4 chip (the first verilated configuration)
  config.device = tessera::driver::rtl_configurations()[0];
  config.mode = argc > 1 ? tessera::systemc::parse_timing_mode(argv[1])
                         : tessera::systemc::TimingMode::kApproximatelyTimed;

  TrafficGenerator cpu("cpu");
  Router bus("bus");
  Memory dram("dram");
  tessera::systemc::TesseraChip chip("tessera", config);
  sc_signal<bool> irq("irq");
  sc_clock clock("clock", config.clock_period, 0.5, config.clock_period / 2, true);

  cpu.socket.bind(bus.in);
  bus.out[0].bind(dram.socket);
  bus.out[1].bind(chip.csr_socket);
  bus.out[2].bind(chip.hbm_socket);
  chip.irq(irq);
  cpu.irq(irq);
  if (config.mode == tessera::systemc::TimingMode::kApproximatelyTimed) chip.clk(clock);

  sc_start();
  std::printf("%s mode: %s of simulated time, %llu chip cycles\n",
              tessera::systemc::timing_mode_name(config.mode), sc_time_stamp().to_string().c_str(),
              static_cast<unsigned long long>(chip.cycles()));
  return cpu.mismatches == 0 ? 0 : 1;
}
