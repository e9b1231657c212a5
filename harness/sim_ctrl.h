// SimCtrl: owns one verilated model with its VerilatedContext, drives clock and reset, dumps
// an FST waveform when asked (WAVES=1 in the environment for a test's whole run, or
// open_waves(path) from then on, optionally for a window of cycles only), and calls the
// per-cycle hooks components plug in (monitors, scoreboards, device models). One cycle is
// tick(): the falling edge with the inputs set by the caller, then the rising edge (the clock
// stays high between cycles); the waveform shows inputs changing on the falling edge. Without
// a waveform, a model whose clock trigger is known (set_clock_prev: the chip) evaluates both
// in one eval() with the same results. final()
// is called on destruction. CombSim is the same for a purely combinational top (no clock).
#pragma once

#include <verilated.h>
#include <verilated_fst_c.h>
#ifdef TESSERA_COVERAGE
#include <unistd.h>
#include <verilated_cov.h>

#include <atomic>
#endif

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

// The directory FST dumps go to (build/waves unless TESSERA_WAVES_DIR says otherwise).
inline std::string waves_dir() {
  if (const char* d = std::getenv("TESSERA_WAVES_DIR")) return d;
#ifdef TESSERA_WAVES_DIR
  return TESSERA_WAVES_DIR;
#else
  return "build/waves";
#endif
}

inline bool waves_requested() {
  const char* w = std::getenv("WAVES");
  return w && std::string(w) != "0" && std::string(w) != "";
}

// A file name from a test name: "MxuMatmul/N4.RandomShapes" -> "MxuMatmul_N4.RandomShapes".
inline std::string wave_file_for(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return waves_dir() + "/" + name + ".fst";
}

template <class Model>
class SimBase {
 public:
  explicit SimBase(const std::string& wave_name) : ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->randReset(2);  // registers without reset start random, never silently zero
    // TESSERA_RAND_SEED=S: another draw of those random start values (a design that depends
    // on a register reset does not set shows up as a different result).
    if (const char* seed = std::getenv("TESSERA_RAND_SEED")) ctx_->randSeed(std::atoi(seed));
    const bool waves = waves_requested() && !wave_name.empty();
    if (waves) ctx_->traceEverOn(true);
    top_ = std::make_unique<Model>(ctx_.get(), "TOP");
    if (waves) open_waves(wave_file_for(wave_name));
  }
  ~SimBase() {
    // Verilator 5.006 erases a model's scopes through the thread's *current* context, which is
    // the last one created: with two models in a process, make it this model's own first (the
    // other's may already be gone; a freed context's mutex hung test_dma_hbm on exit).
    Verilated::threadContextp(ctx_.get());
    top_->final();
    close_waves();
#ifdef TESSERA_COVERAGE
    write_coverage();
#endif
  }
  SimBase(const SimBase&) = delete;
  SimBase& operator=(const SimBase&) = delete;

  // Starts an FST dump into `path` now (the model traces from here; a dump already open is
  // closed first). Times in the file are counted from `origin` (a cycle number of this model's
  // clock, see SimCtrl::set_dump_window): t = (cycle - origin) ns.
  void open_waves(const std::string& path) {
    close_waves();
    ctx_->traceEverOn(true);
    if (!traced_) top_->trace(trace_holder(), 99);
    traced_ = true;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    trace_->open(path.c_str());
    if (!trace_->isOpen()) throw std::runtime_error("waves: cannot write " + path);
    wave_path_ = path;
  }
  // Ends the dump (the file is complete from here on); nothing if none is open.
  void close_waves() {
    if (trace_ && trace_->isOpen()) trace_->close();
  }
  bool dumping() const { return trace_ && trace_->isOpen(); }

  Model& top() { return *top_; }
  // The context: set fatalOnError(false) to observe an RTL $error (gotError()) without abort.
  VerilatedContext& context() { return *ctx_; }
  Model* operator->() { return top_.get(); }
  const std::string& wave_path() const { return wave_path_; }

 protected:
  void dump(uint64_t time) {
    if (dumping()) trace_->dump(time);
  }
  VerilatedFstC* trace_holder() {
    if (!trace_) trace_ = std::make_unique<VerilatedFstC>();
    return trace_.get();
  }
#ifdef TESSERA_COVERAGE
  // The coverage build (make coverage): each model's line and toggle counts go to their own
  // file in TESSERA_COVERAGE_DIR when the model goes away (scripts/coverage.sh merges them).
  void write_coverage() {
    const char* dir = std::getenv("TESSERA_COVERAGE_DIR");
    if (!dir || !*dir) return;
    static std::atomic<unsigned> serial{0};
    const std::string path = std::string(dir) + "/" + std::to_string(::getpid()) + "-" +
                             std::to_string(serial++) + ".dat";
    ctx_->coveragep()->write(path.c_str());
  }
#endif
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Model> top_;
  std::unique_ptr<VerilatedFstC> trace_;
  bool traced_ = false;  // the model is registered with trace_ (once per model)
  std::string wave_path_;
};

// Whether a top has an active-low reset port (SRAM macros, for one, do not).
template <class M, class = void>
struct HasResetPort : std::false_type {};
template <class M>
struct HasResetPort<M, std::void_t<decltype(std::declval<M&>().rst_ni)>> : std::true_type {};

template <class Model>
class SimCtrl : public SimBase<Model> {
  static constexpr bool kHasReset = HasResetPort<Model>::value;

 public:
  using Hook = std::function<void(uint64_t cycle)>;

  explicit SimCtrl(const std::string& wave_name = "") : SimBase<Model>(wave_name) {
    this->top_->clk_i = 0;
    if constexpr (kHasReset) {
      // Asserted from the start (a falling edge, so asynchronous resets take effect at once):
      // nothing runs on random power-up state before reset() releases it.
      this->top_->rst_ni = 1;
      this->top_->eval();
      this->top_->rst_ni = 0;
    }
    this->top_->eval();
  }

  // Holds reset low for `cycles` rising edges, then releases it before a falling edge.
  void reset(int cycles = 2) {
    static_assert(kHasReset, "this top has no rst_ni");
    this->top_->rst_ni = 0;
    for (int i = 0; i < cycles; ++i) tick();
    this->top_->rst_ni = 1;
    this->top_->eval();
  }

  // Settles combinational logic for the inputs set so far (read ready/valid before tick()).
  void eval() { this->top_->eval(); }

  // One clock cycle. Hooks run after the rising edge with the cycle number just completed.
  // Two evaluations a cycle: the falling edge together with the inputs set since the last
  // one (they settle, and assertions sample the settled values at the rising edge), then the
  // rising edge. The clock stays high between cycles; outputs read after tick() are those of
  // the new state, as with a separate falling-edge evaluation (no logic here uses the falling
  // edge), at a third less cost per cycle (Verilator re-evaluates all input-driven logic on
  // every eval(): docs/performance.md). With set_clock_prev and no waveform, one evaluation.
  void tick() {
    Model& m = *this->top_;
    if (single_eval()) {
      // One evaluation: the inputs and the rising edge together. Verilator finds a rising
      // edge by comparing clk_i with its value at the last evaluation; clearing that copy
      // stands for the falling edge without evaluating it (nothing uses the falling edge, and
      // the input-driven logic settles before the edge within the same evaluation, as above).
      this->ctx_->time(kPsPerCycle * (cycle_ + 1));
      m.clk_i = 1;
      *clk_prev_ = 0;
      m.eval();
    } else {
      const bool in_window = cycle_ >= win_from_ && cycle_ < win_to_;
      const uint64_t t = kPsPerCycle * (cycle_ - origin_);
      m.clk_i = 0;
      m.eval();
      if (in_window) this->dump(t + kPsPerCycle / 2);  // inputs, before the edge
      this->ctx_->time(kPsPerCycle * (cycle_ + 1));    // $time in RTL messages, in ps
      m.clk_i = 1;
      m.eval();
      if (in_window) this->dump(t + kPsPerCycle);
      // The window's last cycle: the file is complete (a training run goes on for many more
      // steps). Inside a window every cycle takes this path, so the one-evaluation path never
      // needs the check.
      if (cycle_ + 1 == win_to_) this->close_waves();
    }
    for (auto& hook : hooks_) hook(cycle_);
    ++cycle_;
  }

  // Dumps (with a dump open) only cycles [from, to) of this model's clock, with time 0 of the
  // file at cycle `origin` (a program's doorbell: the file's ns are the program's cycles); by
  // default every cycle from 0. At `to` the dump is closed.
  void set_dump_window(uint64_t origin, uint64_t from, uint64_t to) {
    origin_ = origin;
    win_from_ = from;
    win_to_ = to;
  }

  uint64_t cycle() const { return cycle_; }
  void add_hook(Hook hook) { hooks_.push_back(std::move(hook)); }

  // One evaluation a cycle instead of two (docs/performance.md, "Simulation speed of the
  // chip"): the caller passes the model's copy of clk_i from its last evaluation (Verilator
  // 5.006 names it rootp->__Vtrigrprev__TOP__clk_i; the model's root header must be included),
  // or nullptr for the two evaluations. Waveform dumps always take two (inputs are drawn
  // changing at the falling edge). Every input-driven process then runs once a cycle, not
  // twice: Verilator re-runs all of them on every eval().
  void set_clock_prev(uint8_t* clk_prev) { clk_prev_ = clk_prev; }
  bool single_eval() const {
    return clk_prev_ && !(this->dumping() && cycle_ >= win_from_ && cycle_ < win_to_);
  }

  // The core clock is nominally 1 GHz: a cycle is 1 ns in waveforms (which count in ps).
  static constexpr uint64_t kPsPerCycle = 1000;

 private:
  uint64_t cycle_ = 0;
  std::vector<Hook> hooks_;
  uint8_t* clk_prev_ = nullptr;
  uint64_t origin_ = 0, win_from_ = 0, win_to_ = UINT64_MAX;
};

// A purely combinational top: set inputs, eval(), read outputs. Each eval is one time step
// in the waveform.
template <class Model>
class CombSim : public SimBase<Model> {
 public:
  explicit CombSim(const std::string& wave_name = "") : SimBase<Model>(wave_name) {}
  void eval() {
    this->top_->eval();
    this->dump(time_++);
  }

 private:
  uint64_t time_ = 0;
};

}  // namespace tessera
