// ChipCore over ChipSim<Vtpu_top_n4> and ChipSim<Vtpu_top_n16>.
#include "sim/systemc/chip_core.h"

#include <sstream>
#include <stdexcept>

#include "Vtpu_top_n16.h"
#include "Vtpu_top_n16___024root.h"  // ChipSim: one evaluation a cycle
#include "Vtpu_top_n4.h"
#include "Vtpu_top_n4___024root.h"  // ChipSim: one evaluation a cycle
#include "harness/chip/chip_sim.h"
#include "harness/hbm/hbm_system.h"

namespace tessera::systemc {
namespace {

template <class Model>
class ChipCoreOf : public ChipCore {
 public:
  ChipCoreOf(const driver::DeviceConfig& c, const std::string& wave)
      : chip_(c.channels, hbm::HbmTiming{}, wave), map_(c.channels) {}

  void step() override { chip_.step(); }
  uint32_t csr_read(uint32_t offset) override { return chip_.csr_read(offset); }
  void csr_write(uint32_t offset, uint32_t value) override { chip_.csr_write(offset, value); }
  void hbm_write(uint64_t addr, const std::vector<uint8_t>& bytes,
                 const std::vector<uint8_t>* enables) override {
    chip_.hbm_write(addr, bytes, enables);
  }
  std::vector<uint8_t> hbm_read(uint64_t addr, size_t bytes) override {
    return chip_.hbm_read(addr, bytes);
  }
  uint8_t peek(uint64_t addr) override {
    const hbm::HbmLocation l = map_.locate(addr);
    return chip_.device().channel(l.pc).peek(l.bg, l.bank, l.row, l.col)[addr % 32];
  }
  void poke(uint64_t addr, uint8_t value) override {
    const hbm::HbmLocation l = map_.locate(addr);
    auto& ch = chip_.device().channel(l.pc);
    hbm::Burst b = ch.peek(l.bg, l.bank, l.row, l.col);
    b[addr % 32] = value;
    ch.poke(l.bg, l.bank, l.row, l.col, b);
  }
  uint64_t cycle() const override { return chip_.cycle(); }
  bool irq() override { return chip_.top().irq_o != 0; }
  void idle_to_doorbell_phase() override { chip_.idle_to_doorbell_phase(); }
  void set_cycle_gate(std::function<void()> gate) override {
    chip_.set_cycle_gate(std::move(gate));
  }

 private:
  chip::ChipSim<Model> chip_;
  hbm::HbmAddressMap map_;
};

}  // namespace

std::unique_ptr<ChipCore> ChipCore::make(const driver::DeviceConfig& config,
                                         const std::string& wave_name) {
  const auto built = driver::rtl_configurations();
  if (driver::same_chip(config, built[0]))
    return std::make_unique<ChipCoreOf<Vtpu_top_n4>>(config, wave_name);
  if (driver::same_chip(config, built[1]))
    return std::make_unique<ChipCoreOf<Vtpu_top_n16>>(config, wave_name);
  std::ostringstream s;
  s << "the SystemC platform wraps the verilated chip at N = " << built[0].n << " (UB "
    << built[0].ub_bytes << " bytes, " << built[0].acc_rows << " ACC rows) or N = " << built[1].n
    << " (UB " << built[1].ub_bytes << " bytes, " << built[1].acc_rows
    << " ACC rows), 1 pseudo-channel; asked for N = " << config.n << ", UB " << config.ub_bytes
    << ", ACC " << config.acc_rows << ", " << config.channels << " pseudo-channel(s)";
  throw std::invalid_argument(s.str());
}

}  // namespace tessera::systemc
