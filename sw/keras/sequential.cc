// keras::Sequential over the chip (tessera/keras.h): any layer list the compiler lowers
// (DenseStackStep), on one chip or data-parallel on a ring (TPUStrategy).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "tessera/checkpoint.h"
#include "tessera/keras.h"

namespace tessera::keras {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> device_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
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

// The architecture part of the signature (weights do not depend on the optimizer or batch).
std::string architecture(const std::string& signature) {
  return signature.substr(0, signature.find('|'));
}

}  // namespace

std::vector<uint16_t> model_images(const compiler::DenseStackSpec& spec, const data::Batch& batch) {
  return spec.norm.on ? data::images_to_bf16(batch, spec.norm.mean, spec.norm.variance)
                      : data::images_to_bf16(batch);
}

Sequential::Sequential(std::vector<Layer> layers) : layers_(std::move(layers)) {}
Sequential::Sequential(std::vector<Layer> layers, const TPUStrategy& strategy)
    : layers_(std::move(layers)), strategy_(strategy) {}
Sequential::~Sequential() = default;
void Sequential::add(const Layer& layer) { layers_.push_back(layer); }

void Sequential::compile(const compiler::OptimizerSpec& opt, const std::string& loss,
                         const std::vector<std::string>& metrics, const DeviceOptions& device,
                         uint32_t batch_size, uint64_t weight_seed) {
  auto bad = [](const std::string& why) { throw std::invalid_argument("compile: " + why); };
  const compiler::DenseStackSpec spec = dense_stack_spec(layers_);
  if (loss != "sparse_categorical_crossentropy")
    bad("loss must be sparse_categorical_crossentropy, not '" + loss + "'");
  for (const auto& m : metrics)
    if (m != "accuracy" && m != "sparse_categorical_accuracy") bad("unknown metric '" + m + "'");
  if (device.backend == driver::Backend::kRtl && !driver::rtl_array_built(device.array))
    bad("the rtl backend is built for array sizes 4 and 16 (and 128 after make chip128), not " +
        std::to_string(device.array));
  if (device.backend == driver::Backend::kRtl && device.array == 128 &&
      device.arith != driver::Arith::kHost)
    bad("the rtl chip at N = 128 is built in the host-arithmetic flavour only: use --arith host");
  const int P = strategy_.num_replicas_in_sync;
  if (P < 1) bad("TPUStrategy: num_replicas_in_sync must be at least 1");
  if (batch_size == 0 || batch_size % static_cast<uint32_t>(P) != 0)
    bad("the global batch " + std::to_string(batch_size) + " is not a positive multiple of the " +
        std::to_string(P) + " replicas");
  spec_ = spec;
  opt_ = opt;
  dev_opts_ = device;
  batch_ = batch_size;
  driver::DeviceConfig dc = driver::chip_for_array(device.array);
  dc.backend = device.backend;
  dc.channels = device.channels;
  dc.arith = device.arith;
  const tessera::ChipShape chip = dc;
  const uint32_t per_replica = batch_ / static_cast<uint32_t>(P);
  device_.reset();
  cluster_.reset();
  dev_ = nullptr;
  train_ = nullptr;
  steps_.clear();
  progs_.clear();
  evals_.clear();
  try {
    // Every replica's step is compiled (its rank's program); a process holds the chips it
    // simulates (under mpirun one: Cluster::local), each allocated the same way, so every chip
    // has the same layout and its program at the same address.
    if (P == 1) {
      device_ = driver::Device::open(dc);
    } else {
      cluster_ = driver::Cluster::open(dc, P, strategy_.threads);
    }
    auto chip_dev = [&](int r) -> driver::Device& { return device_ ? *device_ : cluster_->chip(r); };
    auto local = [&](int r) { return device_ || cluster_->local(r); };
    uint64_t base = 0, prog = 0;
    bool first = true;
    for (int r = 0; r < P; ++r) {
      compiler::Replication rep;
      rep.replicas = P;
      rep.rank = r;
      rep.split_update = device.keep_gradients;
      if (!local(r)) {  // its own process allocates and loads it; the same addresses
        steps_.push_back(std::make_unique<compiler::DenseStackStep>(
            spec_, opt_, chip, per_replica, base, compiler::StepKind::kTrain, nullptr,
            compiler::DenseLoweringChoices{}, rep));
        continue;
      }
      driver::Device& d = chip_dev(r);
      const uint64_t need = compiler::DenseStackStep::data_bytes(spec_, chip, per_replica, rep);
      if (need > d.hbm_bytes())
        bad("the training step's data, " + std::to_string(need) + " bytes at a batch of " +
            std::to_string(per_replica) + " a chip, exceed the chip's " +
            std::to_string(d.hbm_bytes()) + "-byte HBM; use a smaller batch");
      const uint64_t b = d.alloc(need);
      if (!first && b != base) throw std::logic_error("compile: the replicas' layouts differ");
      base = b;
      steps_.push_back(std::make_unique<compiler::DenseStackStep>(
          spec_, opt_, chip, per_replica, base, compiler::StepKind::kTrain, nullptr,
          compiler::DenseLoweringChoices{}, rep));
      const uint64_t prog_bytes = steps_.back()->program().size() * isa::kInstructionBytes;
      if (need + prog_bytes > d.hbm_bytes())
        bad("the training step's program (" + std::to_string(prog_bytes) + " bytes) and data (" +
            std::to_string(need) + " bytes) at a batch of " + std::to_string(per_replica) +
            " a chip exceed the chip's " + std::to_string(d.hbm_bytes()) +
            "-byte HBM; use a smaller batch");
      const uint64_t a = d.load_program(steps_.back()->program_bytes());
      if (!first && a != prog) throw std::logic_error("compile: the replicas' programs differ");
      prog = a;
      if (first) {
        dev_ = &d;
        train_ = steps_.back().get();
      }
      first = false;
    }
    // (ranks compiled before this process's first chip: their base was not known yet)
    for (int r = 0; r < P; ++r)
      if (!local(r) && steps_[r]->layout().base != base) {
        compiler::Replication rep;
        rep.replicas = P;
        rep.rank = r;
        rep.split_update = device.keep_gradients;
        steps_[r] = std::make_unique<compiler::DenseStackStep>(
            spec_, opt_, chip, per_replica, base, compiler::StepKind::kTrain, nullptr,
            compiler::DenseLoweringChoices{}, rep);
      }
    progs_.assign(static_cast<size_t>(P), prog);
    train_prog_ = prog;
  } catch (...) {
    device_.reset();
    cluster_.reset();
    dev_ = nullptr;
    train_ = nullptr;
    steps_.clear();
    throw;
  }
  set_state(compiler::glorot_init(spec_, weight_seed), compiler::zero_opt_state(spec_));
}

void Sequential::check_compiled(const char* what) const {
  if (!train_) throw std::logic_error(std::string(what) + ": call compile() first");
}

void Sequential::set_state(const compiler::DenseParams& p, const compiler::DenseOptState& s) {
  check_compiled("set_state");
  const auto image = train_->state_image(p, s);  // the same on every replica
  for (int r = 0; r < replicas(); ++r) {
    if (cluster_ && !cluster_->local(r)) continue;  // its own process writes it
    driver::Device& d = cluster_ ? cluster_->chip(r) : *dev_;
    for (const auto& w : image) d.write(w.first, w.second);
  }
}

// The state's tensors in a fixed order (a replica's state travels as one byte record).
static std::vector<std::vector<float>*> state_tensors(compiler::DenseParams& p,
                                                      compiler::DenseOptState& s) {
  std::vector<std::vector<float>*> t;
  for (compiler::DenseParams* q : {&p, &s.m, &s.v})
    for (size_t j = 0; j < q->kernel.size(); ++j) {
      t.push_back(&q->kernel[j]);
      t.push_back(&q->bias[j]);
    }
  return t;
}

void Sequential::get_state(compiler::DenseParams& p, compiler::DenseOptState& s) {
  check_compiled("get_state");
  if (!cluster_) {
    train_->read_state(device_read, dev_, p, s);
    return;
  }
  // Each chip holds current fp32 weights and moments for the part it updated (the sharded
  // update): each process reads its chips' state, gather() brings every chip's to every
  // process, and the step takes each element from the replica that updated it.
  const int P = replicas();
  std::vector<std::vector<uint8_t>> mine(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    if (!cluster_->local(r)) continue;
    compiler::DenseParams pr;
    compiler::DenseOptState sr;
    train_->read_state(device_read, &cluster_->chip(r), pr, sr);
    std::vector<uint8_t>& rec = mine[static_cast<size_t>(r)];
    for (const std::vector<float>* v : state_tensors(pr, sr)) {
      const auto* b = reinterpret_cast<const uint8_t*>(v->data());
      rec.insert(rec.end(), b, b + v->size() * 4);
    }
    for (float f : {sr.beta1_power, sr.beta2_power}) {
      const auto* b = reinterpret_cast<const uint8_t*>(&f);
      rec.insert(rec.end(), b, b + 4);
    }
    const auto* b = reinterpret_cast<const uint8_t*>(&sr.steps);
    rec.insert(rec.end(), b, b + 4);
  }
  const std::vector<std::vector<uint8_t>> all = cluster_->gather(std::move(mine));
  std::vector<compiler::DenseParams> ps(static_cast<size_t>(P));
  std::vector<compiler::DenseOptState> ss(static_cast<size_t>(P));
  const compiler::DenseOptState shape = compiler::zero_opt_state(spec_);  // the tensors' sizes
  for (size_t r = 0; r < ps.size(); ++r) {
    ps[r] = shape.m;
    ss[r] = shape;
    size_t at = 0;
    const std::vector<uint8_t>& rec = all.at(r);
    for (std::vector<float>* v : state_tensors(ps[r], ss[r])) {
      if (at + v->size() * 4 > rec.size()) throw std::logic_error("get_state: short record");
      std::memcpy(v->data(), rec.data() + at, v->size() * 4);
      at += v->size() * 4;
    }
    if (at + 12 != rec.size()) throw std::logic_error("get_state: record size");
    std::memcpy(&ss[r].beta1_power, rec.data() + at, 4);
    std::memcpy(&ss[r].beta2_power, rec.data() + at + 4, 4);
    std::memcpy(&ss[r].steps, rec.data() + at + 8, 4);
  }
  train_->merge_replica_states(ps, ss, p, s);
}

compiler::DenseParams Sequential::get_weights() {
  compiler::DenseParams p;
  compiler::DenseOptState s;
  get_state(p, s);
  return p;
}

compiler::DenseOptState Sequential::get_optimizer_state() {
  compiler::DenseParams p;
  compiler::DenseOptState s;
  get_state(p, s);
  return s;
}

History Sequential::fit(const data::Dataset& train, const FitOptions& o) {
  check_compiled("fit");
  const bool maps = !spec_.features.empty();
  const size_t values = maps ? spec_.input_shape.size() : spec_.inputs;
  if (size_t{train.rows} * train.cols != values ||
      (maps && (train.rows != spec_.input_shape.h || train.cols != spec_.input_shape.w)))
    throw std::invalid_argument(
        "fit: the dataset's images are " + std::to_string(train.rows) + "x" +
        std::to_string(train.cols) + ", the model takes " +
        (maps ? std::to_string(spec_.input_shape.h) + "x" + std::to_string(spec_.input_shape.w)
              : std::to_string(values) + " values"));
  data::PipelineConfig pc;
  pc.batch = batch_;
  pc.seed = o.seed;
  pc.prefetch = o.prefetch;
  pc.shuffle_buffer = std::max<uint32_t>(1, train.count);
  data::Pipeline pipe(train, pc);
  pipe.seek(o.start);
  const uint64_t per_epoch = pipe.batches_per_epoch();
  const uint64_t total = o.steps ? o.steps : o.epochs * per_epoch;
  History h;
  step_ = o.initial_step;
  for (Callback* c : o.callbacks) c->on_train_begin(*this);
  while (step_ < total) {
    data::Batch batch = pipe.next();
    for (Callback* c : o.callbacks) c->on_batch_begin(*this, batch);
    StepLogs logs = train_on_batch(batch);
    logs.batch = &batch;
    for (Callback* c : o.callbacks) c->on_step_end(*this, logs);
    h.loss.push_back(logs.loss);
    h.accuracy.push_back(logs.accuracy);
    if (batch.index + 1 == per_epoch)
      for (Callback* c : o.callbacks) c->on_epoch_end(*this, batch.epoch);
    if (o.stop_after && step_ >= o.stop_after) break;
  }
  for (Callback* c : o.callbacks) c->on_train_end(*this);
  return h;
}

size_t Sequential::input_values() const {
  return spec_.features.empty() ? spec_.inputs : spec_.input_shape.size();
}

StepLogs Sequential::train_on_batch(const data::Batch& batch) {
  check_compiled("train_on_batch");
  const auto t0 = Clock::now();
  const size_t values = input_values();
  if (batch.labels.size() != batch_ || batch.images.size() != size_t{batch_} * values)
    throw std::invalid_argument("train_on_batch: expected a batch of " + std::to_string(batch_) +
                                " images of " + std::to_string(values) + " values, got " +
                                std::to_string(batch.labels.size()));
  StepLogs logs = train_on_images(model_images(spec_, batch), batch.labels, batch.epoch, batch.index);
  logs.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return logs;
}

StepLogs Sequential::train_on_images(const std::vector<uint16_t>& img,
                                     const std::vector<uint8_t>& batch_labels, uint64_t epoch,
                                     uint64_t index) {
  check_compiled("train_on_images");
  const auto t0 = Clock::now();
  const size_t values = input_values();
  if (batch_labels.size() != batch_ || img.size() != size_t{batch_} * values)
    throw std::invalid_argument("train_on_batch: expected a batch of " + std::to_string(batch_) +
                                " images of " + std::to_string(values) + " values, got " +
                                std::to_string(batch_labels.size()) + " labels and " +
                                std::to_string(img.size()) + " values");
  for (uint8_t l : batch_labels)
    if (l >= spec_.classes())
      throw std::invalid_argument("train_on_batch: label " + std::to_string(l) +
                                  " is not below the model's " + std::to_string(spec_.classes()) +
                                  " classes");
  StepLogs logs;
  const int P = replicas();
  const uint32_t b = train_->batch();
  const bool scheduled = opt_.schedule != compiler::OptimizerSpec::Schedule::kConstant;
  // Replica r trains on samples [r b, (r + 1) b) of the global batch.
  for (int r = 0; r < P; ++r) {
    if (cluster_ && !cluster_->local(r)) continue;
    driver::Device& d = cluster_ ? cluster_->chip(r) : *dev_;
    const compiler::DenseStackStep& st = *steps_[r];
    const std::vector<uint16_t> shard(img.begin() + static_cast<long>(values * b * r),
                                      img.begin() + static_cast<long>(values * b * (r + 1)));
    const std::vector<uint8_t> labels(batch_labels.begin() + static_cast<long>(b) * r,
                                      batch_labels.begin() + static_cast<long>(b) * (r + 1));
    for (const auto& w : st.batch_image(shard, labels)) d.write(w.first, w.second);
    if (scheduled) {  // this step's rate (the optimizer's iteration count from 0)
      const auto row = st.lr_image(opt_.lr_at(step_));
      d.write(row.first, row.second);
    }
  }
  float loss = 0, correct = 0;
  if (!cluster_) {
    logs.report = dev_->run(train_prog_, dev_opts_.timeout_cycles);
    train_->read_metrics(device_read, dev_, loss, correct);
  } else {
    const std::vector<driver::RunReport> reps =
        cluster_->run_all(progs_, dev_opts_.timeout_cycles);
    logs.report = reps[0];
    // The global loss: the mean of the replicas' means (equal shards); correct: the sum. Each
    // process reads its chips' metrics; gather() brings every chip's to every process.
    std::vector<std::vector<uint8_t>> m(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) {
      if (!cluster_->local(r)) continue;
      float lc[2] = {0, 0};
      steps_[r]->read_metrics(device_read, &cluster_->chip(r), lc[0], lc[1]);
      m[r].resize(sizeof lc);
      std::memcpy(m[r].data(), lc, sizeof lc);
    }
    m = cluster_->gather(std::move(m));
    double loss_sum = 0;
    for (int r = 0; r < P; ++r) {
      float lc[2];
      std::memcpy(lc, m[r].data(), sizeof lc);
      loss_sum += lc[0];
      correct += lc[1];
    }
    loss = static_cast<float>(loss_sum / P);
  }
  logs.step = step_++;
  logs.epoch = epoch;
  logs.batch_in_epoch = index;
  logs.loss = loss;
  logs.accuracy = correct / static_cast<float>(batch_);
  logs.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return logs;
}

Sequential::Eval& Sequential::eval_program(uint32_t batch) {
  for (auto& e : evals_)
    if (e.step->batch() == batch) return e;
  const tessera::ChipShape chip = train_->chip();
  const uint64_t base = dev_->alloc(compiler::DenseStackStep::data_bytes(spec_, chip, batch));
  Eval e;
  e.step = std::make_unique<compiler::DenseStackStep>(
      spec_, opt_, chip, batch, base, compiler::StepKind::kEvaluate, &train_->layout());
  e.prog = dev_->load_program(e.step->program_bytes());
  evals_.push_back(std::move(e));
  return evals_.back();
}

void Sequential::run_forward(
    const data::Dataset& ds, uint32_t batch,
    const std::function<void(compiler::DenseStackStep&, uint32_t)>& per_batch) {
  const size_t px = size_t{ds.rows} * ds.cols;
  for (uint32_t s0 = 0; s0 < ds.count; s0 += batch) {
    const uint32_t b = std::min(batch, ds.count - s0);
    data::Batch bt;
    bt.images.assign(ds.images.begin() + s0 * px, ds.images.begin() + (s0 + b) * px);
    bt.labels.assign(ds.labels.begin() + s0, ds.labels.begin() + s0 + b);
    per_batch(forward(model_images(spec_, bt), bt.labels), b);
  }
}

compiler::DenseStackStep& Sequential::forward(const std::vector<uint16_t>& images,
                                              const std::vector<uint8_t>& labels) {
  const uint32_t b = static_cast<uint32_t>(labels.size());
  if (b == 0 || images.size() != size_t{b} * input_values())
    throw std::invalid_argument("evaluate: " + std::to_string(images.size()) +
                                " input values for " + std::to_string(b) +
                                " images of " + std::to_string(input_values()));
  for (uint8_t l : labels)
    if (l >= spec_.classes())
      throw std::invalid_argument("evaluate: label " + std::to_string(l) +
                                  " is not below the model's " + std::to_string(spec_.classes()) +
                                  " classes");
  Eval& e = eval_program(b);
  for (const auto& w : e.step->batch_image(images, labels)) dev_->write(w.first, w.second);
  dev_->run(e.prog, dev_opts_.timeout_cycles);
  return *e.step;
}

EvalResult Sequential::evaluate_images(const std::vector<uint16_t>& images,
                                       const std::vector<uint8_t>& labels) {
  check_compiled("evaluate");
  compiler::DenseStackStep& step = forward(images, labels);
  float loss = 0, c = 0;
  step.read_metrics(device_read, dev_, loss, c);
  EvalResult r;
  r.samples = labels.size();
  r.loss = loss;  // the program reports the batch mean
  r.accuracy = double{c} / static_cast<double>(r.samples);
  return r;
}

std::vector<float> Sequential::predict_images(const std::vector<uint16_t>& images,
                                              uint32_t count) {
  check_compiled("predict");
  compiler::DenseStackStep& step = forward(images, std::vector<uint8_t>(count, 0));
  return step.read_probabilities(device_read, dev_);
}

EvalResult Sequential::evaluate(const data::Dataset& test, uint32_t batch_size) {
  check_compiled("evaluate");
  // default: the training step's batch (under a strategy, one replica's: evaluation runs on
  // one chip, and that batch is known to fit it)
  const uint32_t batch = batch_size ? batch_size : train_->batch();
  EvalResult r;
  double loss_sum = 0, correct = 0;
  run_forward(test, batch, [&](compiler::DenseStackStep& step, uint32_t b) {
    float loss = 0, c = 0;
    step.read_metrics(device_read, dev_, loss, c);
    loss_sum += double{loss} * b;  // the program reports the batch mean
    correct += c;
    r.samples += b;
  });
  r.loss = r.samples ? loss_sum / static_cast<double>(r.samples) : 0.0;
  r.accuracy = r.samples ? correct / static_cast<double>(r.samples) : 0.0;
  return r;
}

std::vector<float> Sequential::predict(const data::Dataset& images, uint32_t batch_size) {
  check_compiled("predict");
  const uint32_t batch = batch_size ? batch_size : train_->batch();
  std::vector<float> out;
  data::Dataset ds = images;
  ds.labels.assign(ds.count, 0);  // labels are not used for the probabilities
  run_forward(ds, batch, [&](compiler::DenseStackStep& step, uint32_t) {
    const auto p = step.read_probabilities(device_read, dev_);
    out.insert(out.end(), p.begin(), p.end());
  });
  return out;
}

void Sequential::save_weights(const std::string& path) {
  check_compiled("save_weights");
  const compiler::DenseParams p = get_weights();
  runlog::Checkpoint c;
  c.model_signature = architecture(signature());
  c.step = step_;
  const auto shapes = compiler::weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j) {
    c.tensors.push_back(
        {"kernel" + std::to_string(j), {shapes[j].first, shapes[j].second}, p.kernel[j]});
    c.tensors.push_back({"bias" + std::to_string(j), {shapes[j].second}, p.bias[j]});
  }
  runlog::save_checkpoint(path, c);
}

void Sequential::load_weights(const std::string& path) {
  check_compiled("load_weights");
  const runlog::Checkpoint c = runlog::load_checkpoint(path, architecture(signature()));
  compiler::DenseParams p;
  compiler::DenseOptState s;
  get_state(p, s);  // keeps the optimizer state on the device
  const auto shapes = compiler::weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j)
    for (auto [name, dst] : {std::pair{"kernel", &p.kernel[j]}, {"bias", &p.bias[j]}}) {
      const std::string want = name + std::to_string(j);
      bool found = false;
      for (const auto& t : c.tensors)
        if (t.name == want) {
          if (t.data.size() != dst->size())
            throw runlog::CheckpointError(runlog::CheckpointError::Kind::kMalformedPayload,
                                          "checkpoint " + path + ": tensor '" + want + "' has " +
                                              std::to_string(t.data.size()) +
                                              " values, the model's " +
                                              std::to_string(dst->size()));
          *dst = t.data;
          found = true;
        }
      if (!found)
        throw runlog::CheckpointError(runlog::CheckpointError::Kind::kMalformedPayload,
                                      "checkpoint " + path + ": no tensor '" + want + "'");
    }
  set_state(p, s);
}

std::string Sequential::summary() const {
  std::ostringstream o;
  char line[96];
  std::snprintf(line, sizeof line, "%-22s%-24s%s\n", "Layer (type)", "Output Shape", "Param #");
  o << line;
  const std::vector<compiler::Shape3> maps =
      spec_.features.empty() ? std::vector<compiler::Shape3>{} : compiler::feature_shapes(spec_);
  const auto shapes = compiler::weight_shapes(spec_);
  size_t fi = 0, dl = 0, wj = 0;
  uint64_t total = 0;
  for (const Layer& l : layers_) {
    std::string shape;
    uint64_t params = 0;
    auto map_shape = [](const compiler::Shape3& s) {
      return "(None, " + std::to_string(s.h) + ", " + std::to_string(s.w) + ", " +
             std::to_string(s.c) + ")";
    };
    switch (l.kind) {
      case Layer::Kind::kNormalization:
        shape = maps.empty() ? "(None, " + std::to_string(spec_.inputs) + ")" : map_shape(maps[0]);
        break;
      case Layer::Kind::kConv2D:
      case Layer::Kind::kMaxPool2D:
      case Layer::Kind::kAveragePool2D:
        shape = map_shape(maps.at(++fi));
        if (l.kind == Layer::Kind::kConv2D) {
          params = uint64_t{shapes[wj].first} * shapes[wj].second + shapes[wj].second;
          ++wj;
        }
        break;
      case Layer::Kind::kFlatten:
        shape = "(None, " + std::to_string(spec_.inputs) + ")";
        break;
      case Layer::Kind::kDense:
        shape = "(None, " + std::to_string(spec_.layers.at(dl++).units) + ")";
        params = uint64_t{shapes[wj].first} * shapes[wj].second + shapes[wj].second;
        ++wj;
        break;
      case Layer::Kind::kDropout:
        shape = "(None, " + std::to_string(spec_.layers.at(dl - 1).units) + ")";
        break;
    }
    total += params;
    std::snprintf(line, sizeof line, "%-22s%-24s%llu\n", kind_name(l.kind), shape.c_str(),
                  static_cast<unsigned long long>(params));
    o << line;
  }
  o << "Total params: " << total << "\n";
  return o.str();
}

std::string Sequential::signature() const {
  const compiler::DenseStackSpec& spec = spec_;
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
          << (f.same ? "same" : "valid") << "," << (f.relu ? "relu" : "linear") << ")-";
      else
        o << (f.kind == compiler::FeatureLayerSpec::Kind::kMaxPool ? "MaxPool2D("
                                                                   : "AveragePooling2D(")
          << f.pool << ")-";
  }
  o << "Flatten(" << spec.inputs << ")";
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    o << "-Dense(" << d.units << ","
      << (l + 1 == spec.layers.size() ? "softmax" : d.relu ? "relu" : "linear") << ")";
    if (d.dropout > 0)
      o << "-Dropout(" << short_float(d.dropout) << ",seed=" << d.dropout_seed << ")";
  }
  const compiler::OptimizerSpec& os = opt_;
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
  o << "|batch=" << batch_;
  return o.str();
}

}  // namespace tessera::keras
