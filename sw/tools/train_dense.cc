// tessera train --model FILE for a Dense stack (Flatten -> Dense ... -> Dense(softmax)):
// compiles the step with DenseStackStep, trains on the chosen backend (checkpointed, resumable:
// --resume, --checkpoint-every, --stop-after), evaluates on the test set and writes the run
// folder: metrics.csv, checkpoint/ckpt.tsr, summary.json and the trained weights in the export
// format (docs/training.md, "Weight export") with the test probabilities of the first images,
// which tests/reference/dense_export_check.py reproduces in PyTorch.
#include "sw/tools/train_dense.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "sw/compiler/graph.h"
#include "sw/numerics/fp_ref.h"
#include "sw/runlog/file_util.h"
#include "sw/tools/run_folder.h"
#include "sw/tools/run_options.h"
#include "sw/tools/step_report.h"
#include "tessera/checkpoint.h"
#include "tessera/data.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tessera/keras.h"
#include "tessera/metrics.h"
#include "tessera/model_file.h"
#include "tessera/plot.h"
#include "tessera/tfevents.h"
#include "tessera/weight_manifest.h"

namespace tessera::tools {
namespace {

std::vector<uint8_t> dev_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
}

std::string g9(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t b = fp::bits(v[i]);
    for (int k = 0; k < 4; ++k) s[i * 4 + k] = static_cast<char>(b >> (8 * k));
  }
  return s;
}

// The activation a layer's export, signature and manifest check name: a conv's relu or linear,
// a Dense layer's relu or linear, the last one's softmax.
const char* conv_activation(const compiler::FeatureLayerSpec& f) {
  return f.relu ? "relu" : "linear";
}
const char* dense_activation(const compiler::DenseStackSpec& spec, size_t l) {
  return l + 1 == spec.layers.size() ? "softmax" : spec.layers[l].relu ? "relu" : "linear";
}

// The export's "normalization" line (Keras's Normalization as the model's first layer), or
// nothing.
std::string normalization_json(const compiler::DenseStackSpec& spec) {
  if (!spec.norm.on) return "";
  return "  \"normalization\": {\"mean\": " + g9(spec.norm.mean) +
         ", \"variance\": " + g9(spec.norm.variance) + "},\n";
}

// The images the host writes for a batch: p / 255, through the model's Normalization if any.
std::vector<uint16_t> images_of(const compiler::DenseStackSpec& spec, const data::Batch& batch) {
  return spec.norm.on ? data::images_to_bf16(batch, spec.norm.mean, spec.norm.variance)
                      : data::images_to_bf16(batch);
}

// A compiled step on a device: the program and its HBM.
std::string hex(uint64_t v) {
  std::ostringstream s;
  s << std::hex << v;
  return s.str();
}

struct Compiled {
  std::unique_ptr<compiler::DenseStackStep> step;
  uint64_t prog = 0;
};

Compiled compile_on(driver::Device& dev, const compiler::DenseStackSpec& spec,
                    const compiler::OptimizerSpec& opt, uint32_t batch, compiler::StepKind kind,
                    const compiler::DenseStackStep::Layout* share) {
  const auto& c = dev.config();
  const tessera::ChipShape chip{c.n, c.ub_bytes, c.acc_rows};
  Compiled k;
  const uint64_t base = dev.alloc(compiler::DenseStackStep::data_bytes(spec, chip, batch));
  k.step = std::make_unique<compiler::DenseStackStep>(spec, opt, chip, batch, base, kind, share);
  k.prog = dev.load_program(k.step->program_bytes());
  return k;
}

// The shortest decimal that reads back as `v` (a signature's rates: 0.001, not 0.00100000005).
std::string short_float(float v) {
  char buf[32];
  for (int p = 6; p < 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, double(v));
    if (std::strtof(buf, nullptr) == v) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

// A checkpoint's identity: the layers with their arguments, the optimizer with its schedule over
// the run, and the batch. A checkpoint of another model or recipe is refused by it; the array
// size and the backend are not in it (the state is the same tensors on any chip).
std::string dense_signature(const compiler::DenseStackSpec& spec, const compiler::OptimizerSpec& os,
                            uint32_t batch) {
  std::ostringstream o;
  if (spec.norm.on)
    o << "Normalization(" << short_float(spec.norm.mean) << "," << short_float(spec.norm.variance)
      << ")-";
  if (!spec.features.empty()) {
    const auto& is = spec.input_shape;
    o << "input=" << is.h << "x" << is.w << "x" << is.c << "-";
    for (const auto& f : spec.features)
      if (f.kind == compiler::FeatureLayerSpec::Kind::kConv)
        o << "Conv2D(" << f.filters << "," << f.kernel << ",s" << f.stride << ","
          << (f.same ? "same" : "valid") << "," << conv_activation(f) << ")-";
      else
        o << (f.kind == compiler::FeatureLayerSpec::Kind::kMaxPool ? "MaxPool2D("
                                                                   : "AveragePooling2D(")
          << f.pool << ")-";
  }
  o << "Flatten(" << spec.inputs << ")";
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    o << "-Dense(" << d.units << "," << dense_activation(spec, l) << ")";
    if (d.dropout > 0)
      o << "-Dropout(" << short_float(d.dropout) << ",seed=" << d.dropout_seed << ")";
  }
  o << "|";
  if (os.kind == compiler::OptimizerSpec::Kind::kAdam)
    o << "Adam(lr=" << short_float(os.lr) << ",b1=" << short_float(os.beta1)
      << ",b2=" << short_float(os.beta2) << ",eps=" << short_float(os.epsilon);
  else
    o << "SGD(lr=" << short_float(os.lr) << ",momentum=" << short_float(os.momentum);
  o << ",schedule=" << compiler::schedule_name(os.schedule);
  if (os.schedule != compiler::OptimizerSpec::Schedule::kConstant) o << " over " << os.decay_steps;
  o << ")";
  if (os.label_smoothing > 0) o << "|label_smoothing=" << short_float(os.label_smoothing);
  o << "|batch=" << batch;
  return o.str();
}

// The state as checkpoint tensors: parameter j's "kernel<j>" [K][U] and "bias<j>" [U], its
// optimizer slots "m/..." (and with Adam "v/..."), and Adam's "beta1_power", "beta2_power".
runlog::Checkpoint dense_checkpoint(const std::string& signature,
                                    const compiler::DenseStackSpec& spec, bool adam,
                                    const compiler::DenseParams& p,
                                    const compiler::DenseOptState& st, uint64_t step,
                                    data::Pipeline::Position pos, uint64_t seed, double loss,
                                    double accuracy) {
  runlog::Checkpoint c;
  c.model_signature = signature;
  c.step = step;
  c.data_epoch = pos.epoch;
  c.data_index = pos.index;
  c.seed = seed;
  const auto shapes = compiler::weight_shapes(spec);
  auto add = [&](const std::string& prefix, const compiler::DenseParams& q) {
    for (size_t j = 0; j < shapes.size(); ++j) {
      c.tensors.push_back({prefix + "kernel" + std::to_string(j),
                           {shapes[j].first, shapes[j].second},
                           q.kernel[j]});
      c.tensors.push_back({prefix + "bias" + std::to_string(j), {shapes[j].second}, q.bias[j]});
    }
  };
  add("", p);
  add("m/", st.m);
  if (adam) {
    add("v/", st.v);
    c.tensors.push_back({"beta1_power", {1}, {st.beta1_power}});
    c.tensors.push_back({"beta2_power", {1}, {st.beta2_power}});
  }
  c.meta = {{"loss", g9(loss)},
            {"accuracy", g9(accuracy)},
            {"optimizer_steps", std::to_string(st.steps)}};
  return c;
}

// The state back from a checkpoint whose signature matched: every tensor present with the
// shape the model gives it, else a CheckpointError naming the file and the tensor.
void from_dense_checkpoint(const runlog::Checkpoint& c, const std::string& path,
                           const compiler::DenseStackSpec& spec, bool adam,
                           compiler::DenseParams& p, compiler::DenseOptState& st) {
  using runlog::CheckpointError;
  auto get = [&](const std::string& name, size_t count) -> const std::vector<float>& {
    for (const auto& t : c.tensors)
      if (t.name == name) {
        if (t.data.size() != count)
          throw CheckpointError(CheckpointError::Kind::kMalformedPayload,
                                "checkpoint " + path + ": tensor '" + name + "' has " +
                                    std::to_string(t.data.size()) + " values, the model's " +
                                    std::to_string(count));
        return t.data;
      }
    throw CheckpointError(CheckpointError::Kind::kMalformedPayload,
                          "checkpoint " + path + ": no tensor '" + name + "'");
  };
  const auto shapes = compiler::weight_shapes(spec);
  auto fill = [&](const std::string& prefix, compiler::DenseParams& q) {
    q.kernel.resize(shapes.size());
    q.bias.resize(shapes.size());
    for (size_t j = 0; j < shapes.size(); ++j) {
      q.kernel[j] =
          get(prefix + "kernel" + std::to_string(j), size_t{shapes[j].first} * shapes[j].second);
      q.bias[j] = get(prefix + "bias" + std::to_string(j), shapes[j].second);
    }
  };
  st = compiler::zero_opt_state(spec);
  fill("", p);
  fill("m/", st.m);
  if (adam) {
    fill("v/", st.v);
    st.beta1_power = get("beta1_power", 1)[0];
    st.beta2_power = get("beta2_power", 1)[0];
  }
  st.steps = 0;
  bool steps = false;
  for (const auto& [key, value] : c.meta) {
    if (key != "optimizer_steps") continue;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v > UINT32_MAX)
      throw CheckpointError(
          CheckpointError::Kind::kMalformedPayload,
          "checkpoint " + path + ": meta optimizer_steps '" + value + "' is not a step count");
    st.steps = static_cast<uint32_t>(v);
    steps = true;
  }
  if (!steps)
    throw CheckpointError(CheckpointError::Kind::kMalformedPayload,
                          "checkpoint " + path + ": no meta optimizer_steps");
}
// The test set's first `total` images through the evaluation program, `batch` at a time, on
// `evd`, with the weights that `weights` (a training step's layout on evd) holds: the mean loss
// and the accuracy, and the probabilities of the first `keep` images. A chip fault is reported
// on `err` with the first image of its batch; the return is false then.
struct DenseEval {
  double loss = 0, accuracy = 0;
  std::vector<float> probs;  // [keep][classes]
};
bool evaluate_on(driver::Device& evd, const compiler::DenseStackSpec& spec,
                 const compiler::OptimizerSpec& os, uint32_t batch,
                 const compiler::DenseStackStep::Layout* weights, const data::Dataset& test_ds,
                 uint32_t total, uint32_t keep, const char* who, DenseEval& r, std::ostream& err) {
  const size_t px = size_t{test_ds.rows} * test_ds.cols;
  std::vector<Compiled> evals;
  auto eval_step = [&](uint32_t b) -> Compiled& {
    for (auto& e : evals)
      if (e.step->batch() == b) return e;
    evals.push_back(compile_on(evd, spec, os, b, compiler::StepKind::kEvaluate, weights));
    return evals.back();
  };
  double loss_sum = 0, hits = 0;
  const uint32_t C = spec.classes();
  for (uint32_t s0 = 0; s0 < total; s0 += batch) {
    const uint32_t b = std::min(batch, total - s0);
    Compiled& e = eval_step(b);
    data::Batch bt;
    bt.images.assign(test_ds.images.begin() + s0 * px, test_ds.images.begin() + (s0 + b) * px);
    bt.labels.assign(test_ds.labels.begin() + s0, test_ds.labels.begin() + s0 + b);
    for (const auto& w : e.step->batch_image(images_of(spec, bt), bt.labels))
      evd.write(w.first, w.second);
    try {
      evd.run(e.prog, 2'000'000'000);
    } catch (const std::exception& ex) {
      err << who << ": evaluation at test image " << s0 << ": " << ex.what() << "\n";
      return false;
    }
    float l = 0, c = 0;
    e.step->read_metrics(dev_read, &evd, l, c);
    loss_sum += double{l} * b;
    hits += c;
    if (s0 < keep) {
      const auto pr = e.step->read_probabilities(dev_read, &evd);
      const uint32_t take = std::min(b, keep - s0);
      r.probs.insert(r.probs.end(), pr.begin(), pr.begin() + size_t{take} * C);
    }
  }
  r.accuracy = hits / total;
  r.loss = loss_sum / total;
  return true;
}

}  // namespace

// A model with layers before Flatten: format "tessera-sequential-weights-1", every layer in
// order (Conv2D, pools, Flatten, Dense, Dropout) with its arguments and tensors.
void export_sequential_weights(const std::string& dir, const std::string& model_name,
                               const compiler::DenseStackSpec& spec,
                               const compiler::DenseParams& p) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  const auto shapes = compiler::weight_shapes(spec);
  const auto& is = spec.input_shape;
  std::ostringstream m;
  m << "{\n  \"format\": \"tessera-sequential-weights-1\",\n  \"model\": \"" << model_name
    << "\",\n  \"input_shape\": [" << is.h << ", " << is.w << ", " << is.c << "],\n"
    << normalization_json(spec) << "  \"layers\": [\n";
  size_t j = 0;
  auto tensors = [&](const std::string& stem, const std::string& kshape, uint32_t units) {
    const std::string k = stem + "_kernel.f32", b = stem + "_bias.f32";
    runlog::write_file_atomically(dir + "/" + k, f32_bytes(p.kernel[j]));
    runlog::write_file_atomically(dir + "/" + b, f32_bytes(p.bias[j]));
    ++j;
    return ", \"kernel\": {\"file\": \"" + k + "\", \"shape\": [" + kshape +
           "]}, \"bias\": {\"file\": \"" + b + "\", \"shape\": [" + std::to_string(units) + "]}";
  };
  uint32_t c = is.c;
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const auto& f = spec.features[i];
    if (f.kind == Kind::kConv) {
      const std::string ks = std::to_string(f.kernel) + ", " + std::to_string(f.kernel) + ", " +
                             std::to_string(c) + ", " + std::to_string(f.filters);
      m << "    {\"class_name\": \"Conv2D\", \"filters\": " << f.filters
        << ", \"kernel_size\": " << f.kernel << ", \"strides\": " << f.stride << ", \"padding\": \""
        << (f.same ? "same" : "valid") << "\", \"activation\": \"" << conv_activation(f) << "\""
        << tensors("conv" + std::to_string(j), ks, f.filters) << "},\n";
      c = f.filters;
    } else {
      m << "    {\"class_name\": \""
        << (f.kind == Kind::kMaxPool ? "MaxPool2D" : "AveragePooling2D")
        << "\", \"pool_size\": " << f.pool << "},\n";
    }
  }
  m << "    {\"class_name\": \"Flatten\"},\n";
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    const bool last = l + 1 == spec.layers.size();
    m << "    {\"class_name\": \"Dense\", \"units\": " << d.units << ", \"activation\": \""
      << dense_activation(spec, l) << "\""
      << tensors("dense" + std::to_string(j), std::to_string(in) + ", " + std::to_string(d.units),
                 d.units)
      << "}" << (last && d.dropout == 0 ? "\n" : ",\n");
    if (d.dropout > 0) m << "    {\"class_name\": \"Dropout\", \"rate\": " << d.dropout << "},\n";
    (void)shapes;
    in = d.units;
  }
  m << "  ]\n}\n";
  runlog::write_file_atomically(dir + "/manifest.json", m.str());
}

void export_dense_weights(const std::string& dir, const std::string& model_name,
                          const compiler::DenseStackSpec& spec, const compiler::DenseParams& p) {
  runlog::make_dirs(dir);
  if (!spec.features.empty()) return export_sequential_weights(dir, model_name, spec, p);
  std::ostringstream m;
  m << "{\n  \"format\": \"tessera-dense-weights-1\",\n  \"model\": \"" << model_name
    << "\",\n  \"inputs\": " << spec.inputs << ",\n"
    << normalization_json(spec) << "  \"layers\": [\n";
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    const std::string k = "dense" + std::to_string(l) + "_kernel.f32",
                      b = "dense" + std::to_string(l) + "_bias.f32";
    runlog::write_file_atomically(dir + "/" + k, f32_bytes(p.kernel[l]));
    runlog::write_file_atomically(dir + "/" + b, f32_bytes(p.bias[l]));
    const bool last = l + 1 == spec.layers.size();
    m << "    {\"class_name\": \"Dense\", \"units\": " << d.units << ", \"activation\": \""
      << dense_activation(spec, l) << "\", \"kernel\": {\"file\": \"" << k << "\", \"shape\": ["
      << in << ", " << d.units << "]}, \"bias\": {\"file\": \"" << b << "\", \"shape\": ["
      << d.units << "]}}" << (last ? "\n" : ",\n");
    in = d.units;
  }
  m << "  ]\n}\n";
  runlog::write_file_atomically(dir + "/manifest.json", m.str());
}

int train_dense(const TrainOptions& opt, const keras::ModelDescription& model,
                const compiler::DenseStackSpec& spec, std::ostream& out, std::ostream& err) {
  auto refuse = [&](const std::string& why) {
    err << "tessera train: " << (opt.model.empty() ? "the example CNN" : opt.model) << ": " << why
        << "\n";
    return 2;
  };
  if (opt.chips != 1)
    return refuse(
        "--chips: data parallelism runs CnnTrainStep's models only (the example CNN with Adam "
        "1e-3, a constant rate, Keras's betas and no label smoothing)");
  // sampled: every step on the functional model, every sample_every-th also on the rtl chip from
  // the same HBM state, checked bit-identical (state, loss, correct count) and timed
  const bool sampled = opt.backend == "sampled";
  if (sampled && opt.sample_every < 1) return refuse("--sample-every: at least 1");
  compiler::OptimizerSpec os;
  if (opt.optimizer == "sgd") {
    if (!opt.default_betas()) return refuse("--beta1/--beta2 are Adam's");
    os.kind = compiler::OptimizerSpec::Kind::kSgd;
    os.lr = opt.lr > 0 ? opt.lr : 0.01f;
    os.momentum = opt.momentum;
  } else {
    os.lr = opt.lr > 0 ? opt.lr : 1e-3f;
    os.beta1 = opt.beta1;
    os.beta2 = opt.beta2;
    if (!(os.beta1 >= 0 && os.beta1 < 1) || !(os.beta2 >= 0 && os.beta2 < 1))
      return refuse("--beta1/--beta2: in [0, 1)");
  }
  os.label_smoothing = opt.label_smoothing;
  try {
    os.schedule = compiler::parse_schedule(opt.lr_schedule);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  const auto in = model.layers.front().input_shape;
  data::Dataset train_ds, test_ds;
  driver::DeviceConfig dc, ec;
  std::unique_ptr<driver::Device> dev, edev, rdev;  // rdev: the sampled mode's rtl chip
  Compiled tr, rtr;
  try {
    const std::string dir = opt.data.empty() ? data::default_data_dir() : opt.data;
    train_ds = data::load_mnist(dir, data::Split::kTrain);
    test_ds = data::load_mnist(dir, data::Split::kTest);
    // the images' dimensions, named as the CNN path names them: the file and the offset
    for (const auto& [set, name] :
         {std::pair<const data::Dataset*, const char*>{&train_ds, "train-images-idx3-ubyte"},
          {&test_ds, "t10k-images-idx3-ubyte"}}) {
      const std::string bad = image_size_error(dir, name, *set, in[0], in[1]);
      if (bad.empty()) continue;
      err << "tessera train: dataset: " << bad << "\n";
      return 2;
    }
    if (in[2] != 1)
      return refuse("input_shape " + std::to_string(in[0]) + "x" + std::to_string(in[1]) + "x" +
                    std::to_string(in[2]) + ": the dataset's images have one channel");
    dc = driver::chip_for_array(opt.array);
    dc.backend = sampled ? driver::Backend::kFunctional : driver::parse_backend(opt.backend);
    dc.arith = driver::parse_arith(opt.arith);
    dc.channels = opt.channels;
    dev = driver::Device::open(dc);
    tr = compile_on(*dev, spec, os, opt.batch, compiler::StepKind::kTrain, nullptr);
    if (sampled) {  // the same program at the same addresses on a fresh rtl chip
      driver::DeviceConfig rc = dc;
      rc.backend = driver::Backend::kRtl;
      rdev = driver::Device::open(rc);
      rtr = compile_on(*rdev, spec, os, opt.batch, compiler::StepKind::kTrain, nullptr);
      if (rtr.prog != tr.prog || rtr.step->state_range() != tr.step->state_range())
        throw std::logic_error("sampled: the rtl chip's layout differs from the functional's");
    }
    ec = dc;
    ec.backend = driver::parse_backend(opt.eval_backend);
    if (ec.backend != dc.backend) edev = driver::Device::open(ec);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  driver::Device& evd = edev ? *edev : *dev;
  data::PipelineConfig pc;
  pc.batch = opt.batch;
  pc.seed = opt.seed;
  data::Pipeline pipe(train_ds, pc);
  const uint64_t per_epoch = pipe.batches_per_epoch();
  const uint64_t steps = opt.steps ? opt.steps : opt.epochs * per_epoch;
  if (steps == 0) return refuse("--epochs 0 (and no --steps): nothing to train");
  os.decay_steps = steps;  // the schedule spans the run
  const bool adam = os.kind == compiler::OptimizerSpec::Kind::kAdam;
  const std::string signature = dense_signature(spec, os, opt.batch);
  // The state: the initial weights, or a checkpoint's (--resume DIR or DIR/checkpoint/ckpt.tsr;
  // refused, before anything is written, when it is corrupt or of another model or recipe).
  uint64_t first_step = 0;
  float loss = 0, correct = 0;  // of the last step taken (a checkpoint's, on resume)
  if (!opt.resume.empty()) {
    std::string path = opt.resume;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) path += "/checkpoint/ckpt.tsr";
    try {
      const runlog::Checkpoint c = runlog::load_checkpoint(path, signature);
      if (c.seed != opt.seed)
        return refuse("checkpoint " + path + " was written with --seed " + std::to_string(c.seed) +
                      ", this run has --seed " + std::to_string(opt.seed));
      if (c.step > steps)
        return refuse("the checkpoint is at step " + std::to_string(c.step) + ", past this run's " +
                      std::to_string(steps) + " steps (--steps / --epochs)");
      compiler::DenseParams p;
      compiler::DenseOptState st;
      from_dense_checkpoint(c, path, spec, adam, p, st);
      for (const auto& w : tr.step->state_image(p, st)) dev->write(w.first, w.second);
      first_step = c.step;
      for (const auto& [key, value] : c.meta) {
        if (key == "loss") loss = std::strtof(value.c_str(), nullptr);
        if (key == "accuracy") correct = std::strtof(value.c_str(), nullptr) * opt.batch;
      }
      pipe.seek({c.data_epoch, c.data_index});
      out << "resuming " << path << " at step " << first_step << " (epoch " << c.data_epoch
          << ", batch " << c.data_index << ")\n";
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  } else {
    const compiler::DenseParams init = compiler::glorot_init(spec, opt.seed);
    for (const auto& w : tr.step->state_image(init, compiler::zero_opt_state(spec)))
      dev->write(w.first, w.second);
    if (!opt.dump_init.empty()) {  // the initial weights, for tests/reference/dense_ref.py
      export_dense_weights(opt.dump_init, model.name, spec, init);
      out << "wrote the initial weights to " << opt.dump_init << "\n";
    }
  }
  std::string run_dir = opt.out;
  if (run_dir.empty()) {  // runs/<timestamp>-<model>, as the CNN's runs/<timestamp>
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    run_dir = "runs/" + std::string(buf) + "-" + model.name;
  }
  // One run at a time in a folder (its lock); resuming in place (--resume DIR --out DIR)
  // continues its metrics.csv from the checkpoint's step, any other run starts it afresh.
  RunFolderLock lock;
  std::unique_ptr<runlog::MetricsCsv> csv_writer;
  std::unique_ptr<runlog::EventWriter> event_writer;  // TensorBoard scalars, as the CNN's runs
  try {
    runlog::make_dirs(run_dir);  // refuses an --out that is a file, naming it
    std::string why;
    if (!lock.acquire(run_dir, why)) return refuse(why);
    runlog::make_dirs(run_dir + "/checkpoint");
    remove_stale_tmp_files(run_dir);
    remove_stale_tmp_files(run_dir + "/checkpoint");
    const std::vector<std::string> columns = {"epoch", "step_cycles"};
    if (same_folder(resume_run_dir(opt.resume), run_dir)) {
      const auto at = static_cast<int64_t>(first_step);
      csv_writer = std::make_unique<runlog::MetricsCsv>(run_dir, columns, at);
      event_writer = std::make_unique<runlog::EventWriter>(run_dir, at);
    } else {
      remove_event_files(run_dir);  // an earlier run's curves
      csv_writer = std::make_unique<runlog::MetricsCsv>(run_dir, columns);
      event_writer = std::make_unique<runlog::EventWriter>(run_dir);
    }
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  runlog::MetricsCsv& csv = *csv_writer;
  runlog::EventWriter& events = *event_writer;
  // The run's configuration (what --resume DIR takes), once its folder has passed the checks.
  write_run_options(run_dir, opt, keras::model_description_json(model));
  const std::string ckpt_path = run_dir + "/checkpoint/ckpt.tsr";
  // The rows of the steps a checkpoint covers are made durable before it is written.
  auto save = [&](uint64_t steps_done) {
    compiler::DenseParams p;
    compiler::DenseOptState st;
    tr.step->read_state(dev_read, dev.get(), p, st);
    csv.sync();
    events.sync();
    runlog::save_checkpoint(
        ckpt_path, dense_checkpoint(signature, spec, adam, p, st, steps_done, pipe.position(),
                                    opt.seed, loss, correct / opt.batch));
  };
  std::vector<uint64_t> cycles;
  const auto t0 = std::chrono::steady_clock::now();
  out << "model " << model.name << ": ";
  if (spec.norm.on)
    out << "Normalization(mean " << g9(spec.norm.mean) << ", variance " << g9(spec.norm.variance)
        << ") -> ";
  if (!spec.features.empty()) {
    const auto& is = spec.input_shape;
    out << is.h << "x" << is.w << "x" << is.c;
    for (const auto& f : spec.features)
      out << (f.kind == compiler::FeatureLayerSpec::Kind::kConv
                  ? " -> Conv2D(" + std::to_string(f.filters) + ", " + std::to_string(f.kernel) +
                        (f.stride > 1 ? ", stride 2" : "") + (f.same ? ", same" : "") +
                        (f.relu ? ", relu)" : ")")
                  : std::string(f.kind == compiler::FeatureLayerSpec::Kind::kMaxPool
                                    ? " -> MaxPool2D("
                                    : " -> AveragePooling2D(") +
                        std::to_string(f.pool) + ")");
    out << " -> Flatten ";
  }
  out << spec.inputs;
  for (const auto& l : spec.layers)
    out << " -> Dense(" << l.units << (l.relu ? ", relu)" : ")")
        << (l.dropout > 0 ? " -> Dropout(" + g9(l.dropout) + ")" : "");
  out << ", " << (os.kind == compiler::OptimizerSpec::Kind::kAdam ? "Adam" : "SGD") << " lr "
      << os.lr
      << (os.schedule == compiler::OptimizerSpec::Schedule::kConstant
              ? ""
              : std::string(" (") + compiler::schedule_name(os.schedule) + " over the run)");
  if (os.kind == compiler::OptimizerSpec::Kind::kAdam && !opt.default_betas())
    out << ", beta_1 " << os.beta1 << " beta_2 " << os.beta2;
  if (os.label_smoothing > 0) out << ", label smoothing " << os.label_smoothing;
  out << ", batch " << opt.batch << ", " << steps << " steps on "
      << (sampled ? "functional, every " + std::to_string(opt.sample_every) +
                        "th step also on rtl (checked bit-identical),"
                  : std::string(driver::backend_name(dc.backend)))
      << " N = " << dc.n << "\n";
  uint64_t last_step = first_step;
  std::string rtl_report;  // the profiled rtl step's per-phase report (cycle_report.txt)
  uint64_t sampled_steps = 0;
  for (uint64_t s = first_step; s < steps; ++s) {
    const data::Batch batch = pipe.next();
    for (const auto& w : tr.step->batch_image(images_of(spec, batch), batch.labels))
      dev->write(w.first, w.second);
    const auto lr_row = tr.step->lr_image(os.lr_at(s));
    dev->write(lr_row.first, lr_row.second);
    driver::RunReport rep;
    // sampled: this step also on the rtl chip, from the functional model's state
    const bool sample_now = sampled && s % opt.sample_every == 0;
    driver::Device& timed = sample_now ? *rdev : *dev;
    // the first step on the rtl chip is profiled: the per-phase cycle report and timeline
    const bool profile = rtl_report.empty() && (sample_now || dc.backend == driver::Backend::kRtl);
    timed.set_sampling(profile ? 256 : 0);
    try {
      if (sample_now) {
        // the functional model's state (weights, optimizer state, powers, constants: contract
        // 4), then this step's batch and rate
        const auto [lo, len] = tr.step->state_range();
        rdev->write(lo, dev->read(lo, len));
        for (const auto& w : tr.step->batch_image(images_of(spec, batch), batch.labels))
          rdev->write(w.first, w.second);
        rdev->write(lr_row.first, lr_row.second);
        rep = rdev->run(tr.prog, 2'000'000'000);
        dev->run(tr.prog, 2'000'000'000);
        const auto a = dev->read(lo, len), b = rdev->read(lo, len);
        float fl, fc, rl, rcorr;
        tr.step->read_metrics(dev_read, dev.get(), fl, fc);
        tr.step->read_metrics(dev_read, rdev.get(), rl, rcorr);
        if (a != b || std::memcmp(&fl, &rl, 4) != 0 || fc != rcorr) {
          size_t at = 0;
          while (at < a.size() && a[at] == b[at]) ++at;
          err << "tessera train: sampled step " << s << ": rtl and functional differ ("
              << (a != b ? "HBM state at 0x" + hex(lo + at) : std::string("loss/accuracy"))
              << ")\n";
          return 1;
        }
        ++sampled_steps;
      } else {
        rep = dev->run(tr.prog, 2'000'000'000);
      }
      if (profile) {
        const auto phases = phase_timings(tr.step->stats(), tr.prog, rep);
        std::ostringstream r;
        const auto& st = tr.step->stats();
        r << "step " << s << ": " << rep.cycles << " cycles; bound " << tr.step->bound_cycles()
          << " cycles (per phase the largest of MXU, VPU, DMA; "
          << g9(double(rep.cycles) / double(tr.step->bound_cycles())) << "x); unit bounds: MXU "
          << tr.step->mxu_bound_cycles() << ", VPU " << tr.step->vpu_bound_cycles() << ", DMA "
          << tr.step->dma_bound_cycles() << " (" << st.hbm_bytes << " HBM bytes at "
          << compiler::DenseStackStep::kHbmBytesPerCycle << " B/cycle), their sum "
          << g9(double(rep.cycles) /
                double(tr.step->mxu_bound_cycles() + tr.step->vpu_bound_cycles() +
                       tr.step->dma_bound_cycles()))
          << "x of the step\n"
          << phase_report(phases, dc.n, dc.channels)
          << "phase      MXU bound  VPU bound  DMA bound\n";
        for (const auto& p : st.phases)
          r << p.name << std::string(p.name.size() < 10 ? 10 - p.name.size() : 1, ' ')
            << p.mxu_bound << "  " << p.vpu << "  " << p.hbm_bytes / 16 << "\n";
        rtl_report = r.str();
        write_chrome_trace(run_dir + "/timeline.json", phases, rep);
        try {
          write_roofline(run_dir + "/roofline.png", phases, dc.n,
                         compiler::DenseStackStep::kHbmBytesPerCycle);
        } catch (const std::exception& e) {
          err << "tessera train: roofline.png not written: " << e.what() << "\n";
        }
      }
    } catch (const std::exception& e) {
      err << "tessera train: step " << s << ": " << e.what() << "\n";
      return 1;
    }
    tr.step->read_metrics(dev_read, dev.get(), loss, correct);
    if (rep.cycles) cycles.push_back(rep.cycles);
    csv.add_row(static_cast<int64_t>(s), loss, correct / opt.batch,
                {double(batch.epoch), double(rep.cycles)});
    events.add_scalar("loss", static_cast<int64_t>(s), loss);
    events.add_scalar("accuracy", static_cast<int64_t>(s), correct / opt.batch);
    if (rep.cycles) {
      events.add_scalar("step_cycles", static_cast<int64_t>(s), static_cast<float>(rep.cycles));
      events.add_scalar("mxu_utilization", static_cast<int64_t>(s),
                        static_cast<float>(double(rep.perf[isa::PERF_MACS]) /
                                           (double(rep.cycles) * dc.n * dc.n)));
    }
    events.flush();
    last_step = s + 1;
    try {
      const bool epoch_end = batch.index + 1 == per_epoch;
      if ((opt.checkpoint_every && (s + 1) % opt.checkpoint_every == 0) || epoch_end ||
          s + 1 == steps || (opt.stop_after && s + 1 >= opt.stop_after))
        save(s + 1);
    } catch (const std::exception& e) {
      err << "tessera train: step " << s << ": checkpoint: " << e.what() << "\n";
      return 1;
    }
    if (opt.progress && (s % 50 == 0 || s + 1 == steps))
      out << "step " << s << " epoch " << batch.epoch << " loss " << loss << " accuracy "
          << correct / opt.batch << (rep.cycles ? " cycles " + std::to_string(rep.cycles) : "")
          << "\n";
    if (opt.stop_after && s + 1 >= opt.stop_after) break;
  }
  if (first_step == steps) {  // resumed at the end: the same checkpoint again
    try {
      save(steps);
    } catch (const std::exception& e) {
      err << "tessera train: step " << steps << ": checkpoint: " << e.what() << "\n";
      return 1;
    }
  }
  if (opt.stop_after && last_step < steps) {
    out << "stopped after step " << last_step << " (checkpoint " << ckpt_path << ")\n";
    return 0;
  }
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  compiler::DenseParams p;
  compiler::DenseOptState st;
  tr.step->read_state(dev_read, dev.get(), p, st);

  // ---- test set: forward passes (the evaluation program reads the weights in place; on
  // another backend the state is copied over first) ----
  const uint32_t total =
      opt.eval_samples ? static_cast<uint32_t>(std::min<uint64_t>(opt.eval_samples, test_ds.count))
                       : test_ds.count;
  Compiled holder;  // the weights' step on the evaluation device (edev)
  const compiler::DenseStackStep::Layout* weights = &tr.step->layout();
  if (edev) {
    holder = compile_on(evd, spec, os, opt.batch, compiler::StepKind::kTrain, nullptr);
    for (const auto& w : holder.step->state_image(p, st)) evd.write(w.first, w.second);
    weights = &holder.step->layout();
  }
  const uint32_t keep = std::min<uint32_t>(total, 1000);
  DenseEval ev;
  if (!evaluate_on(evd, spec, os, opt.batch, weights, test_ds, total, keep, "tessera train", ev,
                   err))
    return 1;
  const double test_acc = ev.accuracy, test_loss = ev.loss;
  const std::vector<float>& probs = ev.probs;
  std::vector<uint64_t> sorted = cycles;
  std::sort(sorted.begin(), sorted.end());
  const uint64_t median = sorted.empty() ? 0 : sorted[sorted.size() / 2];

  // cycle_report.txt: the profiled rtl step's phases when one ran, then the program's
  // statistics; loss.png: the curves of metrics.csv (as the CNN's runs)
  {
    const auto& ps = tr.step->stats();
    std::ostringstream r;
    r << (rtl_report.empty() ? "no rtl step ran (--backend rtl profiles its first step)\n"
                             : rtl_report)
      << "\nprogram: " << ps.instructions << " instructions (" << ps.loops << " REPEAT loops; "
      << ps.executed << " executed: DMA " << ps.dma << ", MXU " << ps.mxu << ", VPU " << ps.vpu
      << "; " << ps.waits << " waits, " << ps.signals << " signals), " << ps.macs << " MACs, "
      << ps.dma_elements << " DMA elements, " << ps.hbm_bytes << " HBM bytes\n"
      << "bound " << tr.step->bound_cycles()
      << " cycles (per phase the largest of MXU, VPU, DMA)\n";
    runlog::write_file_atomically(run_dir + "/cycle_report.txt", r.str());
  }
  try {
    runlog::plot_training_curves(csv.path(), run_dir + "/loss.png");
  } catch (const std::exception& e) {
    err << "tessera train: loss.png not written: " << e.what() << "\n";
  }
  export_dense_weights(run_dir + "/weights", model.name, spec, p);
  runlog::write_file_atomically(run_dir + "/weights/test_probs.f32", f32_bytes(probs));
  std::ostringstream js;
  js << "{\n  \"model\": \"" << model.name << "\",\n  \"compiler\": \"DenseStackStep\",\n"
     << "  \"backend\": \"" << (sampled ? "sampled" : driver::backend_name(dc.backend))
     << "\",\n  \"array\": " << dc.n << ",\n  \"optimizer\": \""
     << (os.kind == compiler::OptimizerSpec::Kind::kAdam ? "adam" : "sgd")
     << "\",\n  \"lr\": " << g9(os.lr) << ",\n  \"lr_schedule\": \""
     << compiler::schedule_name(os.schedule) << "\"";
  if (os.kind == compiler::OptimizerSpec::Kind::kAdam)
    js << ",\n  \"beta_1\": " << g9(os.beta1) << ",\n  \"beta_2\": " << g9(os.beta2);
  js << ",\n  \"label_smoothing\": " << g9(os.label_smoothing) << ",\n  \"batch\": " << opt.batch
     << ",\n  \"steps\": " << steps << ",\n  \"first_step\": " << first_step
     << ",\n  \"seed\": " << opt.seed << ",\n  \"final_loss\": " << g9(loss)
     << ",\n  \"test_samples\": " << total << ",\n  \"test_loss\": " << g9(test_loss)
     << ",\n  \"test_accuracy\": " << g9(test_acc) << ",\n  \"sampled_steps\": " << sampled_steps
     << ",\n  \"median_step_cycles\": " << median << ",\n  \"train_seconds\": " << g9(train_s)
     << ",\n  \"test_probs_images\": " << keep << "\n}\n";
  runlog::write_file_atomically(run_dir + "/summary.json", js.str());
  out << "test accuracy " << test_acc << " loss " << test_loss << " (" << total << " images)";
  if (median) out << ", median step " << median << " cycles";
  out << "\nwrote " << run_dir
      << "/{summary.json,metrics.csv,events.out.tfevents.*,loss.png,cycle_report.txt"
      << (rtl_report.empty() ? "" : ",timeline.json,roofline.png") << ",weights/}\n";
  return 0;
}

namespace {

// The tensors of an export folder, checked against what the model description gives its
// layers (parse_weight_manifest: classes, activations, exact shapes, the Normalization); every
// error names the file.
compiler::DenseParams load_export(const std::string& dir, const compiler::DenseStackSpec& spec) {
  // what the model says the export holds
  runlog::ExpectedWeights want;
  const auto fshapes = compiler::feature_shapes(spec);
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const auto& f = spec.features[i];
    if (f.kind != compiler::FeatureLayerSpec::Kind::kConv) continue;
    want.layers.push_back(
        {"Conv2D", conv_activation(f), {f.kernel, f.kernel, fshapes[i].c, f.filters}});
  }
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    want.layers.push_back({"Dense", dense_activation(spec, l), {in, spec.layers[l].units}});
    in = spec.layers[l].units;
  }
  want.normalization = spec.norm.on;
  want.mean = spec.norm.mean;
  want.variance = spec.norm.variance;
  const std::string mpath = dir + "/manifest.json";
  std::ifstream mf(mpath, std::ios::binary);
  if (!mf) throw std::invalid_argument(mpath + ": cannot open (a weights export folder holds it)");
  const std::string text((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
  compiler::DenseParams p;
  auto read = [&](const runlog::ManifestTensor& t) {
    const std::string file = dir + "/" + t.file;
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(file, ec);
    if (ec) throw std::invalid_argument(file + ": cannot open: " + ec.message());
    if (size != t.count() * 4) {
      std::string shape;
      for (uint64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
      throw std::invalid_argument(file + ": " + std::to_string(size) + " bytes, its shape [" +
                                  shape + "] needs " + std::to_string(t.count() * 4));
    }
    const std::string bytes = runlog::read_file(file);
    if (bytes.size() != size) throw std::invalid_argument(file + ": changed while read");
    std::vector<float> v(t.count());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = fp::f32(static_cast<uint32_t>(runlog::get_le(bytes, i * 4, 4)));
    return v;
  };
  for (const auto& l : runlog::parse_weight_manifest(text, mpath, want)) {
    p.kernel.push_back(read(l.kernel));
    p.bias.push_back(read(l.bias));
  }
  return p;
}

}  // namespace

int evaluate_dense(const EvaluateOptions& opt, std::ostream& out, std::ostream& err) {
  auto refuse = [&](const std::string& why) {
    err << "tessera evaluate: " << why << "\n";
    return 2;
  };
  if (opt.model.empty()) return refuse("--model: the model description file is required");
  if (opt.weights.empty()) return refuse("--weights: the export folder is required");
  compiler::DenseStackSpec spec;
  keras::ModelDescription model;
  compiler::DenseParams p;
  data::Dataset test_ds;
  std::unique_ptr<driver::Device> dev;
  Compiled holder;
  const compiler::OptimizerSpec os;  // the weights' step only holds them
  try {
    if (opt.array < 4 || (opt.array & (opt.array - 1)) != 0)
      return refuse("--array " + std::to_string(opt.array) +
                    ": the chip's array size N is a power of two from 4");
    model = keras::load_model_description(opt.model);
    spec = compiler::stack_from_graph(compiler::compile_graph(
        keras::dense_stack_spec(model.layers), compiler::OptimizerSpec::Kind::kAdam,
        driver::chip_for_array(opt.array), opt.batch));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  try {
    p = load_export(opt.weights, spec);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  try {
    const std::string dir = opt.data.empty() ? data::default_data_dir() : opt.data;
    test_ds = data::load_mnist(dir, data::Split::kTest);
    const auto in = model.layers.front().input_shape;
    const std::string bad = image_size_error(dir, "t10k-images-idx3-ubyte", test_ds, in[0], in[1]);
    if (!bad.empty()) return refuse(bad);
    if (in[2] != 1)
      return refuse(opt.model + ": input_shape " + std::to_string(in[0]) + "x" +
                    std::to_string(in[1]) + "x" + std::to_string(in[2]) +
                    ": the dataset's images have one channel");
    const uint32_t total_images =
        opt.eval_samples
            ? static_cast<uint32_t>(std::min<uint64_t>(opt.eval_samples, test_ds.count))
            : test_ds.count;
    for (uint32_t i = 0; i < total_images; ++i)
      if (test_ds.labels[i] >= spec.classes()) {
        return refuse(idx_path(dir, "t10k-labels-idx1-ubyte") + ": label " +
                      std::to_string(test_ds.labels[i]) + " of image " + std::to_string(i) +
                      ": the model has " + std::to_string(spec.classes()) + " classes");
      }
    driver::DeviceConfig dc = driver::chip_for_array(opt.array);
    dc.backend = driver::parse_backend(opt.backend);
    dc.arith = driver::parse_arith(opt.arith);
    dc.channels = opt.channels;
    dev = driver::Device::open(dc);
    holder = compile_on(*dev, spec, os, opt.batch, compiler::StepKind::kTrain, nullptr);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  for (const auto& w : holder.step->state_image(p, compiler::zero_opt_state(spec)))
    dev->write(w.first, w.second);
  const uint32_t total =
      opt.eval_samples ? static_cast<uint32_t>(std::min<uint64_t>(opt.eval_samples, test_ds.count))
                       : test_ds.count;
  DenseEval ev;
  if (!evaluate_on(*dev, spec, os, opt.batch, &holder.step->layout(), test_ds, total,
                   opt.probs.empty() ? 0 : total, "tessera evaluate", ev, err))
    return 1;
  if (!opt.probs.empty()) {
    try {
      runlog::write_file_atomically(opt.probs, f32_bytes(ev.probs));
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  }
  out << "test accuracy " << ev.accuracy << " loss " << ev.loss << " (" << total << " images)\n";
  return 0;
}

}  // namespace tessera::tools
