// tessera train: trains the example CNN (Conv2D(32,3,relu) -> MaxPool2D -> Flatten ->
// Dense(10,softmax), Adam) on Fashion-MNIST on the simulated chip and writes a run folder
// (docs/training.md): summary.json, metrics.csv, a TensorBoard event file, loss.png, the
// per-phase cycle report and checkpoint/. Backends: rtl (cycle-accurate), functional (bit-exact,
// untimed) and sampled (functional every step, and every K-th step also on rtl, checked
// bit-identical, reporting the rtl cycles). Exit status: 0 done; 2 bad input (flags, dataset,
// configuration, checkpoint) before any training; 1 a chip fault or a sampled mismatch.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>

#include "tessera/data.h"
#include "tessera/dense_step.h"

namespace tessera::tools {

struct TrainOptions {
  std::string backend = "rtl";  // rtl | functional | sampled
  uint64_t steps = 0;           // 0: use epochs
  uint64_t epochs = 1;
  uint32_t batch = 128;
  int array = 16;
  int channels = 1;  // HBM pseudo-channels per chip (rtl: 1, or 2 at N = 16)
  // rtl backend: "rtl" (the synthesizable arithmetic) or "host" (the host-arithmetic build of
  // the same chip: the same cycles and bits, faster to simulate; N = 16, one channel).
  std::string arith = "rtl";
  int chips = 1;    // data-parallel replicas (TPUStrategy); batch is the global batch
  int threads = 0;  // host threads for the rtl ring (0: one per chip, at most the cores)
  uint64_t seed = 0;
  std::string model;              // a model description file (default: the example CNN)
  std::string data;               // default: Debian's dataset-fashion-mnist
  std::string out;                // default: runs/<timestamp>
  std::string resume;             // a run folder (or its checkpoint file) to continue from
  uint64_t sample_every = 10;     // sampled: every K-th step also on rtl
  uint64_t checkpoint_every = 0;  // 0: at each epoch end and at the end
  uint64_t eval_samples = 0;      // 0: the whole test set; else its first N images
  std::string eval_backend = "functional";  // bit-identical to rtl (tested), much faster
  bool progress = true;
  uint64_t stop_after = 0;  // testing resume: stop (with a checkpoint) after this step
  // Writes the initial weights (Keras layouts, raw little-endian fp32: conv_kernel.f32,
  // conv_bias.f32, dense_kernel.f32, dense_bias.f32) and the training sample order (order.u32:
  // the sample ids of every step) into this folder, for tests/reference/train_ref.py.
  std::string dump_init;
  // rtl: dump chip `waves_chip`'s signals during step `waves_step`, cycles [waves_from,
  // waves_to) of the step, into the FST file `waves` (the chip layout beside it).
  std::string waves;
  uint64_t waves_step = 0, waves_from = 0, waves_to = UINT64_MAX;
  int waves_chip = 0;
  // Dense stacks (--model with a Flatten first): the optimizer, adam or sgd; lr 0 is the
  // default (Adam 1e-3, SGD 0.01); SGD's momentum. The example CNN trains with Adam 1e-3.
  std::string optimizer = "adam";
  float lr = 0, momentum = 0;
  // Dense stacks: the learning rate's schedule over the run's steps (constant, cosine, linear;
  // tessera/dense_step.h, OptimizerSpec).
  std::string lr_schedule = "constant";
  // Dense stacks: Adam's beta_1 and beta_2 (OptimizerSpec's defaults, Keras's), and the loss's
  // label smoothing (0: sparse categorical cross-entropy).
  float beta1 = compiler::OptimizerSpec{}.beta1, beta2 = compiler::OptimizerSpec{}.beta2;
  float label_smoothing = 0;
  // The flags given on the command line (their long names without "--"): a resume takes every
  // other option from the run's folder (run_options.h).
  std::set<std::string> given;
  bool default_betas() const {
    return beta1 == compiler::OptimizerSpec{}.beta1 && beta2 == compiler::OptimizerSpec{}.beta2;
  }
};

int train(const TrainOptions& opt, std::ostream& out, std::ostream& err);

// The IDX file NAME in DIR as the dataset loader opens it: NAME, else NAME.gz.
std::string idx_path(const std::string& dir, const char* name);
// "" when `set` (read from DIR's NAME) holds h x w images; else the file, the offset of its
// dimensions, its size and the model's, for a refusal before any training.
std::string image_size_error(const std::string& dir, const char* name, const data::Dataset& set,
                             uint32_t h, uint32_t w);

// tessera report RUN_DIR: prints a run folder's summary (summary.json) and its cycle report
// (cycle_report.txt: per unit, per phase; timeline.json and roofline.png are beside it).
// Exit status 2 when the folder is not a run folder.
int report(const std::string& run_dir, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
