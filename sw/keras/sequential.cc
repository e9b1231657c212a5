// keras::Sequential over the chip (tessera/keras.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "sw/compiler/graph.h"
#include "tessera/checkpoint.h"
#include "tessera/keras.h"

namespace tessera::keras {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> device_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
}

// The chip the rtl backend is built for at this N (sim/CMakeLists.txt; others: functional only).
tessera::ChipShape chip_shape(int n) {
  const driver::DeviceConfig c = driver::chip_for_array(n);
  return {c.n, c.ub_bytes, c.acc_rows};
}

}  // namespace

Sequential::Sequential(std::vector<Layer> layers) : layers_(std::move(layers)) {}
Sequential::Sequential(std::vector<Layer> layers, const TPUStrategy& strategy)
    : layers_(std::move(layers)), strategy_(strategy) {}
Sequential::~Sequential() = default;
void Sequential::add(const Layer& layer) { layers_.push_back(layer); }

void Sequential::compile(const Adam& opt, const std::string& loss,
                         const std::vector<std::string>& metrics, const DeviceOptions& device,
                         uint32_t batch_size, uint64_t weight_seed) {
  auto bad = [](const std::string& why) { throw std::invalid_argument("compile: " + why); };
  const compiler::CnnSpec spec = lowerable_spec(layers_);
  if (loss != "sparse_categorical_crossentropy")
    bad("loss must be sparse_categorical_crossentropy, not '" + loss + "'");
  for (const auto& m : metrics)
    if (m != "accuracy" && m != "sparse_categorical_accuracy") bad("unknown metric '" + m + "'");
  spec_ = spec;
  adam_ = {opt.learning_rate, opt.beta_1, opt.beta_2, opt.epsilon};
  dev_opts_ = device;
  batch_ = batch_size;
  if (device.backend == driver::Backend::kRtl && device.array != 4 && device.array != 16)
    bad("the rtl backend is built for array sizes 4 and 16, not " + std::to_string(device.array));

  const tessera::ChipShape chip = chip_shape(device.array);
  driver::DeviceConfig dc;
  dc.backend = device.backend;
  dc.n = chip.n;
  dc.ub_bytes = chip.ub_bytes;
  dc.acc_rows = chip.acc_rows;
  dc.channels = device.channels;
  dc.arith = device.arith;
  // The graph passes check that every op has a lowering (graph.h); the step's constructor
  // validates the configuration against the chip. On failure nothing stays open.
  const int P = strategy_.num_replicas_in_sync;
  if (P < 1) bad("TPUStrategy: num_replicas_in_sync must be at least 1");
  dev_ = nullptr;
  if (batch_ % static_cast<uint32_t>(P) != 0)
    bad("the global batch " + std::to_string(batch_) + " is not a multiple of the " +
        std::to_string(P) + " replicas");
  const uint32_t per_replica = batch_ / static_cast<uint32_t>(P);
  compiler::compile_graph(spec_, per_replica);
  device_.reset();
  cluster_.reset();
  train_.reset();
  replica_steps_.clear();
  replica_progs_.clear();
  try {
    if (P == 1) {
      const uint64_t data = compiler::CnnTrainStep::data_bytes(spec_, chip, batch_);
      device_ = driver::Device::open(dc);
      dev_ = device_.get();
      const uint64_t base = device_->alloc(data);
      train_ = std::make_unique<compiler::CnnTrainStep>(spec_, adam_, chip, batch_, base);
      train_prog_ = device_->load_program(train_->program_bytes());
    } else {
      // Every chip gets the same layout (the same allocations in the same order) and its
      // rank's program.
      // Under mpirun this process holds one of the chips (Cluster::local): the others' data
      // and programs are written by their own processes, at the same addresses.
      cluster_ = driver::Cluster::open(dc, P, strategy_.threads);
      // The same layout on every chip: this process's chips allocate it first (the same
      // allocations in the same order everywhere), then every rank's step is compiled for it.
      uint64_t base = 0, prog = 0;
      bool have_base = false;
      for (int r = 0; r < P; ++r) {
        if (!cluster_->local(r)) continue;
        compiler::Replication rep;
        rep.replicas = P;
        rep.rank = r;
        const uint64_t b = cluster_->chip(r).alloc(
            compiler::CnnTrainStep::data_bytes(spec_, chip, per_replica, rep));
        if (have_base && b != base) throw std::logic_error("compile: the replicas' layouts differ");
        base = b;
        have_base = true;
        if (!dev_) dev_ = &cluster_->chip(r);  // evaluation: every replica's bf16 weights are equal
      }
      bool have_prog = false;
      for (int r = 0; r < P; ++r) {
        compiler::Replication rep;
        rep.replicas = P;
        rep.rank = r;
        auto step = std::make_unique<compiler::CnnTrainStep>(
            spec_, adam_, chip, per_replica, base, compiler::StepKind::kTrain, nullptr, rep);
        if (cluster_->local(r)) {
          const uint64_t a = cluster_->chip(r).load_program(step->program_bytes());
          if (have_prog && a != prog)
            throw std::logic_error("compile: the replicas' programs differ");
          prog = a;
          have_prog = true;
        }
        if (r == 0) {
          train_ = std::move(step);
        } else {
          replica_steps_.push_back(std::move(step));
        }
      }
      replica_progs_.assign(static_cast<size_t>(P), prog);  // every rank's at the same address
      train_prog_ = prog;
    }
  } catch (...) {
    device_.reset();
    cluster_.reset();
    dev_ = nullptr;
    train_.reset();
    replica_steps_.clear();
    throw;
  }
  evals_.clear();
  set_state(compiler::glorot_init(spec_, weight_seed), compiler::zero_adam_state(spec_));
}

void Sequential::check_compiled(const char* what) const {
  if (!train_) throw std::logic_error(std::string(what) + ": call compile() first");
}

void Sequential::set_state(const compiler::CnnParams& p, const compiler::AdamState& s) {
  check_compiled("set_state");
  const auto image = train_->state_image(p, s);  // the same on every replica
  for (int r = 0; r < replicas(); ++r) {
    if (cluster_ && !cluster_->local(r)) continue;  // its own process writes it
    driver::Device& d = cluster_ ? cluster_->chip(r) : *dev_;
    for (const auto& w : image) d.write(w.first, w.second);
  }
}

// The state's tensors in a fixed order (a replica's state travels as one byte record).
static std::vector<std::vector<float>*> state_tensors(compiler::CnnParams& p,
                                                      compiler::AdamState& s) {
  std::vector<std::vector<float>*> t;
  for (compiler::CnnParams* q : {&p, &s.m, &s.v})
    for (std::vector<float>* v : {&q->conv_kernel, &q->conv_bias, &q->dense_kernel, &q->dense_bias})
      t.push_back(v);
  return t;
}

void Sequential::get_state(compiler::CnnParams& p, compiler::AdamState& s) {
  check_compiled("get_state");
  if (!cluster_) {
    train_->read_state(device_read, dev_, p, s);
    return;
  }
  // Each process reads its chips' state; gather() brings every chip's to every process; the
  // step takes each part from the replica that owns it.
  const int P = replicas();
  std::vector<std::vector<uint8_t>> mine(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    if (!cluster_->local(r)) continue;
    compiler::CnnParams pr;
    compiler::AdamState sr;
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
  }
  const std::vector<std::vector<uint8_t>> all = cluster_->gather(std::move(mine));
  std::vector<compiler::CnnParams> ps(static_cast<size_t>(P));
  std::vector<compiler::AdamState> ss(static_cast<size_t>(P));
  const compiler::CnnParams shape = compiler::zero_adam_state(spec_).m;  // the tensors' sizes
  for (size_t r = 0; r < ps.size(); ++r) {
    ps[r] = shape;
    ss[r].m = shape;
    ss[r].v = shape;
    size_t at = 0;
    const std::vector<uint8_t>& rec = all.at(r);
    for (std::vector<float>* v : state_tensors(ps[r], ss[r])) {
      if (at + v->size() * 4 > rec.size()) throw std::logic_error("get_state: short record");
      std::memcpy(v->data(), rec.data() + at, v->size() * 4);
      at += v->size() * 4;
    }
    if (at + 8 != rec.size()) throw std::logic_error("get_state: record size");
    std::memcpy(&ss[r].beta1_power, rec.data() + at, 4);
    std::memcpy(&ss[r].beta2_power, rec.data() + at + 4, 4);
  }
  train_->merge_replica_states(ps, ss, p, s);
}

compiler::CnnParams Sequential::get_weights() {
  check_compiled("get_weights");
  compiler::CnnParams p;
  compiler::AdamState s;
  get_state(p, s);
  return p;
}

compiler::AdamState Sequential::get_optimizer_state() {
  check_compiled("get_optimizer_state");
  compiler::CnnParams p;
  compiler::AdamState s;
  get_state(p, s);
  return s;
}

History Sequential::fit(const data::Dataset& train, const FitOptions& o) {
  check_compiled("fit");
  if (train.rows != spec_.height || train.cols != spec_.width)
    throw std::invalid_argument("fit: the dataset's images are " + std::to_string(train.rows) +
                                "x" + std::to_string(train.cols) + ", the model takes " +
                                std::to_string(spec_.height) + "x" + std::to_string(spec_.width));
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
    const StepLogs logs = train_on_batch(batch);
    h.loss.push_back(logs.loss);
    h.accuracy.push_back(logs.accuracy);
    for (Callback* c : o.callbacks) c->on_step_end(*this, logs);
    if (batch.index + 1 == per_epoch)
      for (Callback* c : o.callbacks) c->on_epoch_end(*this, batch.epoch);
    if (o.stop_after && step_ >= o.stop_after) break;
  }
  for (Callback* c : o.callbacks) c->on_train_end(*this);
  return h;
}

StepLogs Sequential::train_on_batch(const data::Batch& batch) {
  check_compiled("train_on_batch");
  const auto t0 = Clock::now();
  StepLogs logs;
  float loss = 0, correct = 0;
  if (!cluster_) {
    for (const auto& w : train_->batch_image(data::images_to_bf16(batch), batch.labels))
      dev_->write(w.first, w.second);
    logs.report = dev_->run(train_prog_, dev_opts_.timeout_cycles);
    train_->read_metrics(device_read, dev_, loss, correct);
  } else {
    // Replica r trains on samples [r b, (r + 1) b) of the global batch.
    if (batch.labels.size() != batch_ ||
        batch.images.size() != size_t{batch_} * spec_.height * spec_.width)
      throw std::invalid_argument("train_on_batch: expected a global batch of " +
                                  std::to_string(batch_) + " images, got " +
                                  std::to_string(batch.labels.size()));
    const int P = replicas();
    const uint32_t b = train_->batch();
    const std::vector<uint16_t> img = data::images_to_bf16(batch);
    const size_t px = size_t{spec_.height} * spec_.width;
    for (int r = 0; r < P; ++r) {
      if (!cluster_->local(r)) continue;
      const compiler::CnnTrainStep& st = r == 0 ? *train_ : *replica_steps_[r - 1];
      const std::vector<uint16_t> shard(img.begin() + static_cast<long>(px * b * r),
                                        img.begin() + static_cast<long>(px * b * (r + 1)));
      const std::vector<uint8_t> labels(batch.labels.begin() + static_cast<long>(b) * r,
                                        batch.labels.begin() + static_cast<long>(b) * (r + 1));
      for (const auto& w : st.batch_image(shard, labels))
        cluster_->chip(r).write(w.first, w.second);
    }
    const std::vector<driver::RunReport> reps =
        cluster_->run_all(replica_progs_, dev_opts_.timeout_cycles);
    logs.report = reps[0];
    // The global loss: the mean of the replicas' means (equal shards); correct: the sum. Each
    // process reads its chips' metrics; gather() brings every chip's to every process.
    std::vector<std::vector<uint8_t>> m(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) {
      if (!cluster_->local(r)) continue;
      float lc[2] = {0, 0};
      train_->read_metrics(device_read, &cluster_->chip(r), lc[0], lc[1]);
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
  logs.epoch = batch.epoch;
  logs.batch_in_epoch = batch.index;
  logs.loss = loss;
  logs.accuracy = correct / static_cast<float>(batch_);
  logs.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return logs;
}

compiler::CnnTrainStep& Sequential::eval_program(uint32_t batch) {
  for (auto& e : evals_)
    if (e.step->batch() == batch) return *e.step;
  const tessera::ChipShape chip = train_->chip();
  const uint64_t base = dev_->alloc(compiler::CnnTrainStep::data_bytes(spec_, chip, batch));
  Eval e;
  e.step = std::make_unique<compiler::CnnTrainStep>(
      spec_, adam_, chip, batch, base, compiler::StepKind::kEvaluate, &train_->layout());
  e.prog = dev_->load_program(e.step->program_bytes());
  evals_.push_back(std::move(e));
  return *evals_.back().step;
}

void Sequential::run_forward(
    const data::Dataset& ds, uint32_t batch,
    const std::function<void(compiler::CnnTrainStep&, uint32_t)>& per_batch) {
  const size_t px = size_t{ds.rows} * ds.cols;
  for (uint32_t s0 = 0; s0 < ds.count; s0 += batch) {
    const uint32_t b = std::min(batch, ds.count - s0);
    compiler::CnnTrainStep& step = eval_program(b);
    uint64_t prog = 0;
    for (const auto& e : evals_)
      if (e.step.get() == &step) prog = e.prog;
    data::Batch bt;
    bt.images.assign(ds.images.begin() + s0 * px, ds.images.begin() + (s0 + b) * px);
    bt.labels.assign(ds.labels.begin() + s0, ds.labels.begin() + s0 + b);
    for (const auto& w : step.batch_image(data::images_to_bf16(bt), bt.labels))
      dev_->write(w.first, w.second);
    dev_->run(prog, dev_opts_.timeout_cycles);
    per_batch(step, b);
  }
}

EvalResult Sequential::evaluate(const data::Dataset& test, uint32_t batch_size) {
  check_compiled("evaluate");
  // default: the training step's batch (under a strategy, one replica's: evaluation runs on
  // one chip, and that batch is known to fit it)
  const uint32_t batch = batch_size ? batch_size : train_->batch();
  EvalResult r;
  double loss_sum = 0, correct = 0;
  run_forward(test, batch, [&](compiler::CnnTrainStep& step, uint32_t b) {
    float loss = 0, c = 0;
    step.read_metrics(device_read, dev_, loss, c);
    loss_sum += double{loss} * b;  // the program reports the batch mean
    correct += c;
    r.samples += b;
  });
  r.loss = loss_sum / static_cast<double>(r.samples);
  r.accuracy = correct / static_cast<double>(r.samples);
  return r;
}

std::vector<float> Sequential::predict(const data::Dataset& images, uint32_t batch_size) {
  check_compiled("predict");
  // default: the training step's batch (under a strategy, one replica's: evaluation runs on
  // one chip, and that batch is known to fit it)
  const uint32_t batch = batch_size ? batch_size : train_->batch();
  std::vector<float> out;
  data::Dataset ds = images;
  ds.labels.assign(ds.count, 0);  // labels are not used for the probabilities
  run_forward(ds, batch, [&](compiler::CnnTrainStep& step, uint32_t) {
    const auto p = step.read_probabilities(device_read, dev_);
    out.insert(out.end(), p.begin(), p.end());
  });
  return out;
}

namespace {
// The architecture part of the signature (weights do not depend on the optimizer or batch).
std::string architecture(const std::string& signature) {
  return signature.substr(0, signature.find('|'));
}
}  // namespace

void Sequential::save_weights(const std::string& path) {
  check_compiled("save_weights");
  const compiler::CnnParams p = get_weights();
  runlog::Checkpoint c;
  c.model_signature = architecture(signature());
  c.step = step_;
  c.tensors = {{"conv_kernel", {spec_.kernel, spec_.kernel, 1, spec_.filters}, p.conv_kernel},
               {"conv_bias", {spec_.filters}, p.conv_bias},
               {"dense_kernel", {spec_.features(), spec_.classes}, p.dense_kernel},
               {"dense_bias", {spec_.classes}, p.dense_bias}};
  runlog::save_checkpoint(path, c);
}

void Sequential::load_weights(const std::string& path) {
  check_compiled("load_weights");
  const runlog::Checkpoint c = runlog::load_checkpoint(path, architecture(signature()));
  compiler::CnnParams p;
  for (const auto& t : c.tensors) {
    if (t.name == "conv_kernel") p.conv_kernel = t.data;
    if (t.name == "conv_bias") p.conv_bias = t.data;
    if (t.name == "dense_kernel") p.dense_kernel = t.data;
    if (t.name == "dense_bias") p.dense_bias = t.data;
  }
  // Keeps the optimizer state on the device; state_image checks every tensor's size.
  set_state(p, get_optimizer_state());
}

std::string Sequential::summary() const {
  std::ostringstream o;
  const uint32_t ch = spec_.conv_h(), cw = spec_.conv_w();
  o << "Layer (type)      Output Shape        Param #\n";
  o << "Conv2D            (None, " << ch << ", " << cw << ", " << spec_.filters << ")    "
    << spec_.taps() * spec_.filters + spec_.filters << "\n";
  o << "MaxPool2D         (None, " << spec_.pool_h() << ", " << spec_.pool_w() << ", "
    << spec_.filters << ")    0\n";
  o << "Flatten           (None, " << spec_.features() << ")        0\n";
  o << "Dense             (None, " << spec_.classes << ")          "
    << spec_.features() * spec_.classes + spec_.classes << "\n";
  return o.str();
}

std::string Sequential::signature() const {
  std::ostringstream o;
  o << "Conv2D(" << spec_.filters << "," << spec_.kernel << ",relu,input=" << spec_.height << "x"
    << spec_.width << "x1)-MaxPool2D(" << spec_.pool << ")-Flatten-Dense(" << spec_.classes
    << ",softmax)|Adam(lr=" << adam_.lr << ",b1=" << adam_.beta1 << ",b2=" << adam_.beta2
    << ",eps=" << adam_.epsilon << ")|batch=" << batch_;
  if (replicas() > 1) o << "|replicas=" << replicas();
  return o.str();
}

}  // namespace tessera::keras
