// The run folder of a training run as keras::Sequential::fit callbacks (docs/training.md, "The
// run folder"): `tessera train` fits its model with them, and so can any program that trains a
// keras::Sequential. RunLog writes metrics.csv, the TensorBoard scalars, the checkpoint and the
// first rtl step's per-phase timings (timeline.json, roofline.png) as the steps go;
// SampledCheck is the sampled backend (functional steps, every K-th also on an rtl chip,
// checked bit-identical); SampleOrder writes the sample order a reference run replays.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sw/tools/step_report.h"
#include "tessera/checkpoint.h"
#include "tessera/keras.h"
#include "tessera/metrics.h"
#include "tessera/tfevents.h"

namespace tessera::tools {

// The state as checkpoint tensors: parameter j's "kernel<j>" [K][U] and "bias<j>" [U], its
// optimizer slots "m/..." (and with Adam "v/..."), Adam's "beta1_power", "beta2_power"; the
// meta holds the last step's loss and accuracy and the optimizer's step count.
runlog::Checkpoint to_checkpoint(keras::Sequential& model, uint64_t step,
                                 data::Pipeline::Position pos, uint64_t seed, double loss,
                                 double accuracy);
// The state back from a checkpoint whose signature matched: every tensor present with the
// shape the model gives it, else a CheckpointError naming the file and the tensor.
void from_checkpoint(const runlog::Checkpoint& c, const std::string& path,
                     const keras::Sequential& model, compiler::DenseParams& p,
                     compiler::DenseOptState& st);

// A sampled step's rtl and functional results differ (what names the first difference).
class SampledMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The sampled backend: every `every`-th step (steps s with s % every == 0) the model's state is
// copied into `shadow` (the same model compiled for the rtl chip) before the step, the step runs
// on both, and the loss, accuracy and state must be bit-identical (SampledMismatch otherwise);
// the rtl step's report (cycles, counters, samples) replaces the step's logs for the callbacks
// after this one.
class SampledCheck : public keras::Callback {
 public:
  SampledCheck(keras::Sequential& shadow, uint64_t every) : shadow_(shadow), every_(every) {}
  void on_batch_begin(keras::Sequential& m, const data::Batch& b) override;
  void on_step_end(keras::Sequential& m, keras::StepLogs& logs) override;
  uint64_t steps_checked() const { return checked_; }

 private:
  keras::Sequential& shadow_;
  uint64_t every_;
  uint64_t checked_ = 0;
};

// Each batch's sample ids appended to a file (uint32 little-endian; tests/reference replays the
// order).
class SampleOrder : public keras::Callback {
 public:
  explicit SampleOrder(const std::string& path);
  ~SampleOrder() override;
  void on_batch_begin(keras::Sequential&, const data::Batch& b) override;

 private:
  std::FILE* f_ = nullptr;
};

// The run folder as the steps go. After each step: a metrics.csv row (epoch, step_cycles,
// mxu_utilization, wall_seconds) and the TensorBoard scalars; a checkpoint every
// `checkpoint_every` steps (0: none but these), at each epoch's end and when fit ends, the rows
// it covers made durable first. The first step whose report has samples (an rtl step sampled
// with Device::set_sampling; `profiled`: that chip's model) gives the per-phase timings,
// timeline.json and roofline.png, and turns the sampling off. `progress`: a progress line.
class RunLog : public keras::Callback {
 public:
  struct Config {
    std::string dir;  // the run folder (checkpoint/ckpt.tsr inside)
    uint64_t seed = 0;
    uint64_t checkpoint_every = 0;
    uint64_t total_steps = 0, batches_per_epoch = 0;
    uint64_t first_step = 0;
    data::Pipeline::Position start{};         // the data position of first_step
    double last_loss = 0, last_accuracy = 0;  // of the step before first_step (a resume's)
    int n = 16;
    keras::Sequential* profiled = nullptr;
    std::ostream* progress = nullptr;
  };
  RunLog(const Config& c, runlog::MetricsCsv& csv, runlog::EventWriter& events, std::ostream& err);
  void on_train_begin(keras::Sequential&) override;
  void on_step_end(keras::Sequential& m, keras::StepLogs& logs) override;
  void on_train_end(keras::Sequential& m) override;

  // What the run's summary and cycle report need.
  const std::vector<uint64_t>& step_cycles() const { return step_cycles_; }
  const std::vector<driver::RunReport>& reports() const { return reports_; }
  const std::vector<PhaseTiming>& phases() const { return phases_; }
  uint64_t profiled_step() const { return profiled_step_; }
  uint64_t last_step() const { return last_step_; }
  double last_loss() const { return last_loss_; }
  double last_accuracy() const { return last_acc_; }
  double wall_seconds() const;  // since on_train_begin
  std::string checkpoint_path() const { return c_.dir + "/checkpoint/ckpt.tsr"; }

 private:
  void save(keras::Sequential& m, uint64_t steps_done, data::Pipeline::Position pos);
  Config c_;
  runlog::MetricsCsv& csv_;
  runlog::EventWriter& events_;
  std::ostream& err_;
  std::vector<uint64_t> step_cycles_;
  std::vector<driver::RunReport> reports_;
  std::vector<PhaseTiming> phases_;
  uint64_t profiled_step_ = 0, last_step_ = 0;
  double last_loss_ = 0, last_acc_ = 0;
  data::Pipeline::Position next_{};  // the data position after the last step
  double t0_ = 0;
};

// The sampling interval of the profiled rtl step (cycles; a few CSR reads between clock edges,
// the step's cycles unchanged).
constexpr uint64_t kProfileSampleEvery = 32;

}  // namespace tessera::tools
