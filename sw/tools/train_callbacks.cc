// The run folder as fit callbacks (sw/tools/train_callbacks.h).
#include "sw/tools/train_callbacks.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>

#include "tessera/isa_gen.h"

namespace tessera::tools {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string g9(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

constexpr double kClockHz = 1.0e9;  // nominal chip clock for simulated images per second

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
// Two models' states bit for bit; `what` names the first tensor that differs.
bool same_state(keras::Sequential& x, keras::Sequential& y, std::string& what) {
  compiler::DenseParams px, py;
  compiler::DenseOptState sx, sy;
  x.get_state(px, sx);
  y.get_state(py, sy);
  for (size_t j = 0; j < px.kernel.size(); ++j) {
    const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>>
        all[] = {{"kernel", {&px.kernel[j], &py.kernel[j]}},
                 {"bias", {&px.bias[j], &py.bias[j]}},
                 {"optimizer slot m (kernel)", {&sx.m.kernel[j], &sy.m.kernel[j]}},
                 {"optimizer slot v (kernel)", {&sx.v.kernel[j], &sy.v.kernel[j]}}};
    for (const auto& e : all)
      if (!same_bits(*e.second.first, *e.second.second)) {
        what = std::string(e.first) + " of layer with weights " + std::to_string(j);
        return false;
      }
  }
  if (sx.beta1_power != sy.beta1_power || sx.beta2_power != sy.beta2_power ||
      sx.steps != sy.steps) {
    what = "optimizer powers";
    return false;
  }
  return true;
}

std::string bar(double frac, int width) {
  const int full = static_cast<int>(frac * width);
  std::string s(width, ' ');
  for (int i = 0; i < full && i < width; ++i) s[i] = '=';
  if (full < width) s[full] = '>';
  return s;
}


}  // namespace

// The state as checkpoint tensors: parameter j's "kernel<j>" [K][U] and "bias<j>" [U], its
// optimizer slots "m/..." (and with Adam "v/..."), and Adam's "beta1_power", "beta2_power".
runlog::Checkpoint to_checkpoint(keras::Sequential& model, uint64_t step,
                                 data::Pipeline::Position pos, uint64_t seed, double loss,
                                 double accuracy) {
  compiler::DenseParams p;
  compiler::DenseOptState st;
  model.get_state(p, st);
  const bool adam = model.optimizer().kind == compiler::OptimizerSpec::Kind::kAdam;
  runlog::Checkpoint c;
  c.model_signature = model.signature();
  c.step = step;
  c.data_epoch = pos.epoch;
  c.data_index = pos.index;
  c.seed = seed;
  const auto shapes = compiler::weight_shapes(model.spec());
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
void from_checkpoint(const runlog::Checkpoint& c, const std::string& path,
                     const keras::Sequential& model, compiler::DenseParams& p,
                     compiler::DenseOptState& st) {
  using runlog::CheckpointError;
  const compiler::DenseStackSpec& spec = model.spec();
  const bool adam = model.optimizer().kind == compiler::OptimizerSpec::Kind::kAdam;
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


void SampledCheck::on_batch_begin(keras::Sequential& m, const data::Batch& b) {
  if (m.step() % every_ != 0) return;
  compiler::DenseParams p;
  compiler::DenseOptState s;
  m.get_state(p, s);
  shadow_.set_state(p, s);
  shadow_.set_step(m.step());
  (void)b;
}

void SampledCheck::on_step_end(keras::Sequential& m, keras::StepLogs& logs) {
  if (logs.step % every_ != 0 || !logs.batch) return;
  const keras::StepLogs rtl = shadow_.train_on_batch(*logs.batch);
  std::string what;
  if (std::memcmp(&rtl.loss, &logs.loss, 4) != 0 || rtl.accuracy != logs.accuracy ||
      !same_state(m, shadow_, what))
    throw SampledMismatch("sampled step " + std::to_string(logs.step) +
                          ": rtl and functional differ (" +
                          (what.empty() ? std::string("loss/accuracy") : what) + ")");
  logs.report = rtl.report;
  ++checked_;
}

SampleOrder::SampleOrder(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {
  if (!f_) throw std::runtime_error(path + ": cannot write");
}
SampleOrder::~SampleOrder() {
  if (f_) std::fclose(f_);
}
void SampleOrder::on_batch_begin(keras::Sequential&, const data::Batch& b) {
  if (std::fwrite(b.sample_ids.data(), 4, b.sample_ids.size(), f_) != b.sample_ids.size())
    throw std::runtime_error("the sample order: cannot write");
  std::fflush(f_);
}

RunLog::RunLog(const Config& c, runlog::MetricsCsv& csv, runlog::EventWriter& events,
               std::ostream& err)
    : c_(c), csv_(csv), events_(events), err_(err) {
  last_step_ = c.first_step;
  last_loss_ = c.last_loss;
  last_acc_ = c.last_accuracy;
}

void RunLog::on_train_begin(keras::Sequential&) {
  t0_ = now_seconds();
  if (c_.profiled) c_.profiled->device().set_sampling(kProfileSampleEvery);
  next_ = c_.start;  // the data position of the first step (a resume's: the checkpoint's)
}

double RunLog::wall_seconds() const { return now_seconds() - t0_; }

// The rows and events of the steps a checkpoint covers are made durable before it is written,
// so that a resume at its step finds them all (and drops any logged after it).
void RunLog::save(keras::Sequential& m, uint64_t steps_done, data::Pipeline::Position pos) {
  csv_.sync();
  events_.sync();
  runlog::save_checkpoint(checkpoint_path(),
                          to_checkpoint(m, steps_done, pos, c_.seed, last_loss_, last_acc_));
}

void RunLog::on_step_end(keras::Sequential& m, keras::StepLogs& logs) {
  const uint64_t s = logs.step;
  const int n = c_.n;
  if (c_.profiled && phases_.empty() && !logs.report.samples.empty()) {
    profiled_step_ = s;
    const compiler::DenseStackStep& step = c_.profiled->train_step();
    phases_ = phase_timings(step.stats(), c_.profiled->train_program_address(), logs.report,
                            step.chip().channels);
    write_chrome_trace(c_.dir + "/timeline.json", phases_, logs.report);
    try {
      write_roofline(c_.dir + "/roofline.png", phases_, n,
                     double(compiler::kHbmBytesPerCycle) * step.chip().channels);
    } catch (const std::exception& e) {
      err_ << "tessera train: roofline.png not written: " << e.what() << "\n";
    }
    c_.profiled->device().set_sampling(0);
    logs.report.samples.clear();
  }
  const uint64_t cyc = logs.report.cycles;
  const double mxu_util =
      cyc ? static_cast<double>(logs.report.perf[isa::PERF_MACS]) / (double(cyc) * n * n) : 0.0;
  if (cyc) {
    step_cycles_.push_back(cyc);
    reports_.push_back(logs.report);
  }
  csv_.add_row(static_cast<int64_t>(s), logs.loss, logs.accuracy,
               {double(logs.epoch), double(cyc), mxu_util, logs.wall_seconds});
  events_.add_scalar("loss", static_cast<int64_t>(s), logs.loss);
  events_.add_scalar("accuracy", static_cast<int64_t>(s), logs.accuracy);
  if (cyc) {
    events_.add_scalar("step_cycles", static_cast<int64_t>(s), static_cast<float>(cyc));
    events_.add_scalar("mxu_utilization", static_cast<int64_t>(s), static_cast<float>(mxu_util));
  }
  events_.flush();
  last_loss_ = logs.loss;
  last_acc_ = logs.accuracy;
  last_step_ = s + 1;
  const bool epoch_end = logs.batch_in_epoch + 1 == c_.batches_per_epoch;
  next_ = epoch_end ? data::Pipeline::Position{logs.epoch + 1, 0}
                    : data::Pipeline::Position{logs.epoch, logs.batch_in_epoch + 1};
  if ((c_.checkpoint_every && (s + 1) % c_.checkpoint_every == 0) || epoch_end)
    save(m, s + 1, next_);
  if (c_.progress) {
    const double wall = wall_seconds();
    const double done = double(s + 1 - c_.first_step);
    const uint32_t batch = m.batch_size();
    std::ostream& o = *c_.progress;
    o << "\rstep " << s + 1 << "/" << c_.total_steps << " ["
      << bar(double(s + 1) / double(c_.total_steps), 24) << "] loss " << std::fixed
      << std::setprecision(4) << logs.loss << " acc " << std::setprecision(3) << logs.accuracy;
    if (!step_cycles_.empty())
      o << " | " << step_cycles_.back() << " cyc/step, MXU " << std::setprecision(1)
        << 100.0 * mxu_util << "%, " << std::setprecision(0)
        << batch * kClockHz / double(step_cycles_.back()) << " img/s sim";
    o << " | " << std::setprecision(2) << done * batch / wall << " img/s wall   "
      << std::defaultfloat << std::flush;
  }
}

void RunLog::on_train_end(keras::Sequential& m) {
  if (c_.progress) *c_.progress << "\n";
  save(m, last_step_, next_);
  events_.flush();
}

}  // namespace tessera::tools
