// End-to-end tests of `tessera train` (sw/tools/train_tool.cc, docs/training.md): the run
// folder, bad input, resuming after a kill (once, and 24 times in place: docs/errors.md), the
// run folder's lock, corrupt checkpoints and determinism. Every test
// runs the real binary (TESSERA_BIN_DIR/tessera) from the repository root on the functional
// backend with batch 8 and a few steps, in a fresh temp dir.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/checkpoint.h"
#include "tessera/tfevents.h"
#include "tests/common/test_util.h"

namespace {

namespace fs = std::filesystem;
using tessera::runlog::Checkpoint;
using tessera::runlog::CheckpointError;

const std::string kTessera = std::string(TESSERA_BIN_DIR) + "/tessera";
const std::string kPython = "/usr/bin/python3";
const std::string kData = "/usr/share/datasets/fashion-mnist";
// Options every run shares: fast evaluation, no progress bar.
const std::string kCommon = " --eval-samples 64 --no-progress";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) out.push_back(part);
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  for (auto& l : split(s, '\n'))
    if (!l.empty()) out.push_back(l);
  return out;
}

// A command's exit status, stdout and stderr.
struct Result {
  int status = -1;  // exit status, or -1 when it did not exit normally
  std::string out, err;
};

// The model signature stored in a checkpoint file: the payload starts with it (a uint32 length
// and its bytes) right after the header (checkpoint.h).
std::string stored_signature(const std::string& bytes) {
  const size_t at = tessera::runlog::kCheckpointHeaderBytes;
  if (bytes.size() < at + 4) return "";
  uint32_t len = 0;
  std::memcpy(&len, bytes.data() + at, 4);
  if (bytes.size() < at + 4 + len) return "";
  return bytes.substr(at + 4, len);
}

// Loads a checkpoint with the signature it carries (so every check but the signature's runs).
Checkpoint load(const std::string& path) {
  const std::string bytes = read_file(path);
  return tessera::runlog::load_checkpoint(path, stored_signature(bytes));
}

class TrainTool : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_test_train.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure())
      fs::remove_all(dir_, ec);
    else
      std::fprintf(stderr, "kept %s\n", dir_.c_str());
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // A model description file of the test's: a 28x28x1 input and these layers (JSON objects).
  std::string model_file(const std::string& file, const std::string& layers) const {
    std::ofstream f(path(file));
    f << R"({"name": "tiny_conv", "input_shape": [28, 28, 1], "layers": [)" << layers << "]}";
    return path(file);
  }

  // Runs `cmd` through the shell with stdout and stderr captured.
  Result sh(const std::string& cmd) {
    const std::string o = path("cmd.out"), e = path("cmd.err");
    const int rc = std::system((cmd + " >" + o + " 2>" + e).c_str());
    Result r;
    if (rc != -1 && WIFEXITED(rc)) r.status = WEXITSTATUS(rc);
    r.out = read_file(o);
    r.err = read_file(e);
    return r;
  }
  // `tessera train ARGS` with the common options, on the functional backend unless ARGS names one.
  Result train(const std::string& args) { return sh(train_cmd(args)); }
  static std::string train_cmd(const std::string& args) {
    const bool backend = args.find("--backend ") != std::string::npos;
    return kTessera + " train" + kCommon + (backend ? "" : " --backend functional") + " " + args;
  }
  // Starts `cmd` in the background (its pid is the command's: sh execs it), stdout to
  // /dev/null, stderr to `log`.
  static pid_t spawn(const std::string& cmd, const std::string& log) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen(log.c_str(), "w", stderr);
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }

  std::string dir_;
};

// The first `n` comma-separated columns of every line of a CSV.
std::vector<std::string> columns(const std::string& csv, size_t n) {
  std::vector<std::string> out;
  for (const auto& l : lines(csv)) {
    auto f = split(l, ',');
    if (f.size() > n) f.resize(n);
    std::string joined;
    for (size_t i = 0; i < f.size(); ++i) joined += (i ? "," : "") + f[i];
    out.push_back(joined);
  }
  return out;
}

void expect_same_checkpoint(const Checkpoint& a, const Checkpoint& c) {
  EXPECT_EQ(a.model_signature, c.model_signature);
  EXPECT_EQ(a.step, c.step);
  EXPECT_EQ(a.data_epoch, c.data_epoch);
  EXPECT_EQ(a.data_index, c.data_index);
  EXPECT_EQ(a.seed, c.seed);
  ASSERT_EQ(a.tensors.size(), c.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto &x = a.tensors[i], &y = c.tensors[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape) << x.name;
    ASSERT_EQ(x.data.size(), y.data.size()) << x.name;
    EXPECT_EQ(std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(float)), 0)
        << "tensor " << x.name << " differs";
  }
}

TEST_F(TrainTool, RunFolder) {
  const std::string run = path("run");
  const Result r = train("--steps 4 --batch 8 --seed 1 --out " + run);
  ASSERT_EQ(r.status, 0) << r.err;

  // summary.json
  const Result js = sh(kPython +
                       " -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                       "keys=[\"backend\",\"steps\",\"batch\",\"test_accuracy\",\"test_loss\","
                       "\"step_cycles\",\"mxu_utilization\",\"wall_seconds\"]; "
                       "print(\",\".join(k for k in keys if k not in d) or \"-\"); "
                       "print(d[\"steps\"], d[\"batch\"], d[\"backend\"])' " +
                       run + "/summary.json");
  ASSERT_EQ(js.status, 0) << js.err;
  EXPECT_EQ(js.out, "-\n4 8 functional\n") << "missing keys, or steps/batch/backend wrong";

  // metrics.csv: header, 4 rows, losses printed as %.9g of a float
  const auto csv = lines(read_file(run + "/metrics.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_EQ(csv[0].rfind("step,loss,accuracy", 0), 0u) << csv[0];
  std::vector<std::string> losses;
  for (size_t i = 1; i < csv.size(); ++i) {
    const auto f = split(csv[i], ',');
    ASSERT_GE(f.size(), 3u) << csv[i];
    EXPECT_EQ(f[0], std::to_string(i - 1));
    losses.push_back(f[1]);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", std::stof(f[1]));
    EXPECT_EQ(f[1], buf) << "loss not printed with 9 significant digits";
    size_t digits = 0;
    for (char ch : f[1]) digits += ch >= '0' && ch <= '9';
    EXPECT_GE(digits, 7u) << f[1];  // a loss ~2.3 has 9 unless its %.9g ends in zeros
  }

  // the TensorBoard event file, read by the independent Python reader
  std::string events;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      events = e.path().string();
  ASSERT_FALSE(events.empty()) << "no events.out.tfevents.* in " << run;
  const Result ev = sh(kPython + " tests/reference/read_tfevents.py " + events);
  ASSERT_EQ(ev.status, 0) << ev.err;
  std::vector<std::string> ev_losses;
  for (const auto& l : lines(ev.out)) {
    const auto f = split(l, ',');
    if (f.size() == 3 && f[1] == "loss") {
      EXPECT_EQ(f[0], std::to_string(ev_losses.size()));
      ev_losses.push_back(f[2]);
    }
  }
  ASSERT_EQ(ev_losses.size(), 4u) << ev.out;
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(std::stof(ev_losses[i]), std::stof(losses[i])) << "step " << i;

  // loss.png
  EXPECT_EQ(read_file(run + "/loss.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(exists(run + "/cycle_report.txt"));

  // the checkpoint: magic, loads, step 4, the model's and Adam's tensors
  const std::string ckpt = run + "/checkpoint/ckpt.tsr";
  const std::string bytes = read_file(ckpt);
  ASSERT_EQ(bytes.substr(0, 8), "TSRCKPT1");
  Checkpoint c;
  ASSERT_NO_THROW(c = load(ckpt));
  EXPECT_EQ(c.step, 4u);
  EXPECT_EQ(c.seed, 1u);
  std::vector<std::string> names;
  for (const auto& t : c.tensors) names.push_back(t.name);
  for (const char* want : {"kernel0", "bias0", "kernel1", "bias1", "m/kernel1", "v/kernel0",
                           "beta1_power", "beta2_power"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  // another model's signature is refused
  try {
    tessera::runlog::load_checkpoint(ckpt, "not-this-model");
    ADD_FAILURE() << "a wrong signature was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.kind(), CheckpointError::Kind::kSignatureMismatch) << e.what();
  }
}

TEST_F(TrainTool, BadInputExitsBeforeTraining) {
  // Each case: exit status, a substring of stderr; the --out folder must get no metrics.
  auto check = [&](const std::string& args, int want_status, const std::string& want_err) {
    SCOPED_TRACE(args);
    const std::string out = path("out");
    const Result r = train("--steps 2 --batch 8 --out " + out + " " + args);
    if (want_status >= 0)
      EXPECT_EQ(r.status, want_status) << r.err;
    else
      EXPECT_NE(r.status, 0) << r.err;
    EXPECT_NE(r.err.find(want_err), std::string::npos) << "stderr: " << r.err;
    EXPECT_FALSE(exists(out + "/metrics.csv"));
    EXPECT_FALSE(exists(out + "/checkpoint/ckpt.tsr"));
  };
  check("--data /nonexistent/fashion", 2, "/nonexistent/fashion");

  // The test-set files under the training names, the images file cut short.
  const std::string data = path("truncated");
  fs::create_directories(data);
  const Result cut = sh(kPython + " -c 'import gzip,sys; d=gzip.open(sys.argv[1]).read(); " +
                        "open(sys.argv[2],\"wb\").write(d[:len(d)-1000])' " + kData +
                        "/t10k-images-idx3-ubyte.gz " + data + "/train-images-idx3-ubyte");
  ASSERT_EQ(cut.status, 0) << cut.err;
  for (const char* f : {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(kData + "/" + f, data + "/" + f);
  fs::copy_file(kData + "/t10k-labels-idx1-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
  check("--data " + data, 2, "offset");
  check("--data " + data, 2, "train-images-idx3-ubyte");

  check("--backend rtl --array 12", 2, "array sizes");
  check("--backend rtl --array 4 --arith host", 2, "--arith host");
  check("--arith fast", 2, "--arith");
  check("--batch 5000", 2, "--batch");
  check("--bogus", 2, "--bogus");
  check("--chips 3", 2, "not a positive multiple of the 3 replicas");
  check("--optimizer rmsprop", 2, "--optimizer");
  check("--label-smoothing 1.5", -1, "--label-smoothing");
  const std::string mlp = std::string(TESSERA_SOURCE_DIR) + "/examples/models/mlp.json";
  check("--model " + mlp + " --beta1 1", 2, "--beta1/--beta2: in [0, 1)");
  check("--model " + mlp + " --optimizer sgd --beta2 0.99", 2, "--beta1/--beta2 are Adam's");
}

// Run A trains 6 steps. Run B, the same run checkpointing every step, is killed (SIGKILL)
// mid-way; run C resumes B's checkpoint. C must end bit-identical to A. On one chip, and on two
// (the sharded update: the checkpoint gathers each chip's part, the resume gives every chip the
// whole state).
class TrainToolResume : public TrainTool, public ::testing::WithParamInterface<const char*> {};

TEST_P(TrainToolResume, ResumeAfterKillIsBitIdentical) {
  const std::string flags = std::string(" --steps 6 --batch 8 --seed 3") + GetParam();
  const std::string a = path("A"), b = path("B"), c = path("C");
  const Result ra = train(flags + " --out " + a);
  ASSERT_EQ(ra.status, 0) << ra.err;

  const std::string b_cmd = train_cmd(flags + " --checkpoint-every 1 --out " + b);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen((b + ".stderr").c_str(), "w", stderr);
    ::execl("/bin/sh", "sh", "-c", ("exec " + b_cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string b_ckpt = b + "/checkpoint/ckpt.tsr";
  bool killed = false, exited = false;
  uint64_t killed_at = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      exited = true;
      break;
    }
    if (exists(b_ckpt)) {
      try {
        const Checkpoint ck = load(b_ckpt);
        if (ck.step >= 2 && ck.step < 6) {
          ::kill(pid, SIGKILL);
          ::waitpid(pid, &st, 0);
          killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
          exited = !killed;
          killed_at = ck.step;
          break;
        }
      } catch (const CheckpointError&) {
        // being replaced right now (the rename is atomic, but read and stat race); retry
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!killed && !exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL() << "run B neither checkpointed step 2..5 nor finished in 120 s";
  }
  Checkpoint at_kill;
  if (killed) {
    ASSERT_NO_THROW(at_kill = load(b_ckpt));
    killed = at_kill.step < 6;  // it may have got further between the check and the kill
  }
  if (!killed) {
    // Fallback (B finished or got to step 6 before the kill landed, e.g. on a very loaded
    // machine): stop it deterministically after step 3 instead.
    std::printf("run B was not killed mid-way; using --stop-after 3\n");
    fs::remove_all(b);
    const Result rb = train(flags + " --stop-after 3 --out " + b);
    ASSERT_EQ(rb.status, 0) << rb.err;
    ASSERT_NO_THROW(at_kill = load(b_ckpt));
    ASSERT_EQ(at_kill.step, 3u);
  } else {
    std::printf("run B killed with its checkpoint at step %llu (seen %llu)\n",
                static_cast<unsigned long long>(at_kill.step),
                static_cast<unsigned long long>(killed_at));
    EXPECT_FALSE(exists(b + "/summary.json")) << "B was killed after it finished";
  }

  const Result rc = train(flags + " --resume " + b + " --out " + c);
  ASSERT_EQ(rc.status, 0) << rc.err;
  EXPECT_NE(rc.out.find("resuming"), std::string::npos) << rc.out;

  Checkpoint ca, cc;
  ASSERT_NO_THROW(ca = load(a + "/checkpoint/ckpt.tsr"));
  ASSERT_NO_THROW(cc = load(c + "/checkpoint/ckpt.tsr"));
  EXPECT_EQ(ca.step, 6u);
  expect_same_checkpoint(ca, cc);

  // C's steps have the same loss and accuracy as A's.
  const auto rows_a = columns(read_file(a + "/metrics.csv"), 3);
  const auto rows_c = columns(read_file(c + "/metrics.csv"), 3);
  ASSERT_EQ(rows_a.size(), 7u);
  ASSERT_EQ(rows_c.size(), 1 + 6 - at_kill.step);
  for (size_t i = 1; i < rows_c.size(); ++i)
    EXPECT_EQ(rows_c[i], rows_a[at_kill.step + i]) << "resumed row " << i;
}

INSTANTIATE_TEST_SUITE_P(Chips, TrainToolResume, ::testing::Values("", " --chips 2"),
                         [](const auto& info) {
                           return std::string(info.param[0] ? "TwoChips" : "OneChip");
                         });

// The step a checkpoint file is at, read from its header (the step follows the model
// signature: checkpoint.h), or -1 when there is none (yet). Cheap enough to poll.
int64_t checkpoint_step(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(4096, '\0');
  f.read(&head[0], static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  const size_t at = tessera::runlog::kCheckpointHeaderBytes;
  if (head.size() < at + 4) return -1;
  uint32_t len = 0;
  std::memcpy(&len, head.data() + at, 4);
  if (head.size() < at + 4 + len + 8) return -1;
  uint64_t step = 0;
  std::memcpy(&step, head.data() + at + 4 + len, 8);
  return static_cast<int64_t>(step);
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      out.push_back(e.path().string());
  return out;
}

// An event file's records (the TFRecord data, each one serialized Event) with the wall_time
// (field 1, a fixed64 that the writer puts first) zeroed; the CRCs are checked by
// read_scalar_events first.
std::vector<std::string> event_records_without_wall_time(const std::string& path) {
  tessera::runlog::read_scalar_events(path);  // throws naming the record on any damage
  const std::string file = read_file(path);
  std::vector<std::string> out;
  for (size_t pos = 0; pos + 12 <= file.size();) {
    uint64_t len = 0;
    std::memcpy(&len, file.data() + pos, 8);
    std::string data = file.substr(pos + 12, len);
    if (data.size() >= 9 && data[0] == '\x09') std::memset(&data[1], 0, 8);
    out.push_back(data);
    pos += 12 + len + 4;
  }
  return out;
}

// metrics.csv without its last column (wall_seconds).
std::vector<std::string> metrics_without_wall_seconds(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& l : lines(read_file(path))) out.push_back(l.substr(0, l.rfind(',')));
  return out;
}

// summary.json without the fields that measure this invocation (wall-clock times, the step it
// started at); one field a line, trailing commas dropped.
std::vector<std::string> summary_without_wall_clock(const std::string& path) {
  std::vector<std::string> out;
  for (auto l : lines(read_file(path))) {
    bool skip = false;
    for (const char* k : {"\"wall_seconds\"", "\"eval_wall_seconds\"", "\"images_per_second_wall\"",
                          "\"first_step\""})
      skip = skip || l.find(k) != std::string::npos;
    if (skip) continue;
    if (!l.empty() && l.back() == ',') l.pop_back();
    out.push_back(l);
  }
  return out;
}

// Crash safety (docs/errors.md): a run is SIGKILLed 24 times at random points — mid-step,
// while a checkpoint, metrics.csv or the event file is being written, at start-up, during the
// final evaluation and run-folder writes — and each time resumed in place (--resume K --out K;
// started afresh when it died before its first checkpoint) until it finishes. The folder must
// then equal an uninterrupted run's: the checkpoint byte for byte, metrics.csv and the event
// file identical but for their wall-clock fields (wall_seconds, every event's wall_time),
// summary.json but for the wall-clock fields and first_step, exactly one event file, and no
// tmp file left (after the first kill the test also plants two, as a kill inside an atomic
// write leaves them). The kill points come from a seeded generator (TESSERA_SEED replays them).
TEST_F(TrainTool, KilledTwentyFourTimesResumesToTheUninterruptedRun) {
  constexpr int kKills = 24;
  constexpr int64_t kSteps = 30;
  const std::string flags = " --steps 30 --batch 8 --seed 3 --checkpoint-every 1";
  const std::string u = path("uninterrupted"), k = path("killed");
  const Result ru = train(flags + " --out " + u);
  ASSERT_EQ(ru.status, 0) << ru.err;

  std::mt19937_64 rng(tessera::test::test_seed());
  const std::string ckpt = k + "/checkpoint/ckpt.tsr";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  int kills = 0, fresh_starts = 0, tmp_left = 0;
  std::string kill_log;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "too slow; kills so far:" << kill_log;
    const int64_t at_start = checkpoint_step(ckpt);
    const bool resume = at_start >= 0;
    fresh_starts += !resume;
    const std::string log = path("attempt" + std::to_string(attempt) + ".stderr");
    const pid_t pid =
        spawn(train_cmd(flags + (resume ? " --resume " + k : std::string()) + " --out " + k), log);
    ASSERT_GT(pid, 0);
    int st = 0;
    if (kills == kKills) {  // the last run goes to the end
      ASSERT_EQ(::waitpid(pid, &st, 0), pid);
      ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
      break;
    }
    // The kill point: once the checkpoint has moved 0 to 3 steps past where this attempt
    // started (0: during start-up), 0 to 50 ms later (a step takes about 30 ms here); about
    // 1.5 steps a kill, so that the last kills land after the last step too.
    const int64_t target = std::min<int64_t>(at_start + static_cast<int64_t>(rng() % 4), kSteps);
    const int delay_us = static_cast<int>(rng() % 50000);
    bool exited = false;
    while (checkpoint_step(ckpt) < target) {
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        exited = true;
        break;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << read_file(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!exited) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      ::kill(pid, SIGKILL);
      ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    }
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      ++kills;
      for (const auto& e : fs::recursive_directory_iterator(k))  // the next start removes it
        tmp_left += e.path().filename().string().find(".tmp.") != std::string::npos;
      if (kills == 1 && fs::exists(k)) {  // as a kill inside the atomic writes would leave them
        fs::create_directories(k + "/checkpoint");
        write_file(k + "/checkpoint/ckpt.tsr.tmp.99999", "half a checkpoint");
        write_file(k + "/summary.json.tmp.99999", "{\"half");
      }
      kill_log += " " + std::to_string(checkpoint_step(ckpt)) + "+" +
                  std::to_string(delay_us / 1000) + "ms";
      continue;
    }
    // It ended by itself before the kill landed: only the finished run may do that.
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
    ASSERT_EQ(checkpoint_step(ckpt), kSteps);
    ADD_FAILURE() << "the run finished after only " << kills << " kills (at" << kill_log << ")";
    break;
  }
  std::printf(
      "%d kills; %d starts without a checkpoint (the first included); %d tmp files seen after "
      "the kills (counted at each; two planted after the first); checkpoint step + delay at "
      "each kill:%s\n",
      kills, fresh_starts, tmp_left, kill_log.c_str());

  EXPECT_EQ(read_file(k + "/checkpoint/ckpt.tsr"), read_file(u + "/checkpoint/ckpt.tsr"))
      << "the final checkpoints differ";
  const auto mu = metrics_without_wall_seconds(u + "/metrics.csv");
  const auto mk = metrics_without_wall_seconds(k + "/metrics.csv");
  ASSERT_EQ(mu.size(), 1u + kSteps);
  ASSERT_EQ(mk.size(), mu.size()) << read_file(k + "/metrics.csv");
  for (size_t i = 0; i < mu.size(); ++i) EXPECT_EQ(mk[i], mu[i]) << "metrics.csv line " << i + 1;
  const auto eu = event_files(u), ek = event_files(k);
  ASSERT_EQ(eu.size(), 1u);
  ASSERT_EQ(ek.size(), 1u) << "the killed run's folder has other than one event file";
  std::vector<std::string> ru_events, rk_events;
  ASSERT_NO_THROW(ru_events = event_records_without_wall_time(eu[0]));
  ASSERT_NO_THROW(rk_events = event_records_without_wall_time(ek[0]));
  ASSERT_EQ(ru_events.size(), 1u + 2 * kSteps);  // file_version, then loss and accuracy a step
  ASSERT_EQ(rk_events.size(), ru_events.size());
  for (size_t i = 0; i < ru_events.size(); ++i)
    EXPECT_EQ(rk_events[i], ru_events[i]) << "event record " << i << " differs";
  EXPECT_EQ(summary_without_wall_clock(k + "/summary.json"),
            summary_without_wall_clock(u + "/summary.json"));
  EXPECT_EQ(read_file(k + "/cycle_report.txt"), read_file(u + "/cycle_report.txt"));
  for (const auto& e : fs::recursive_directory_iterator(k))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
        << "left behind: " << e.path();
}

// Two runs with the same --out: the second exits 2 at once naming the folder and the first
// one's pid (flock on DIR/.lock), before writing anything; the first finishes undisturbed.
TEST_F(TrainTool, SecondRunOnTheSameFolderIsRefused) {
  const std::string run = path("run");
  const pid_t first =
      spawn(train_cmd("--steps 60 --batch 8 --seed 1 --checkpoint-every 5 --out " + run),
            path("first.stderr"));
  ASSERT_GT(first, 0);
  // Wait until the first run is training and has a checkpoint (for the second's --resume).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (checkpoint_step(run + "/checkpoint/ckpt.tsr") < 5) {
    int st = 0;
    ASSERT_NE(::waitpid(first, &st, WNOHANG), first) << "the first run ended too early";
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Stopped (SIGSTOP) while the second runs try, so it cannot finish and let go of its lock
  // first however fast the machine is; it holds the lock all the same.
  ASSERT_EQ(::kill(first, SIGSTOP), 0);
  for (const std::string& extra : std::vector<std::string>{"", " --resume " + run}) {
    SCOPED_TRACE(extra);
    const Result second =
        train("--steps 60 --batch 8 --seed 1 --checkpoint-every 5 --out " + run + extra);
    EXPECT_EQ(second.status, 2) << second.err;
    EXPECT_NE(second.err.find("run folder " + run + " is in use by another tessera train (pid " +
                              std::to_string(first) + " holds " + run + "/.lock)"),
              std::string::npos)
        << second.err;
  }
  ASSERT_EQ(::kill(first, SIGCONT), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(first, &st, 0), first);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(path("first.stderr"));
  // The first run's folder is whole: 60 rows in order, one event file of 60 steps, its summary.
  const auto rows = columns(read_file(run + "/metrics.csv"), 1);
  ASSERT_EQ(rows.size(), 61u);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i], std::to_string(i - 1));
  const auto ev = event_files(run);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(tessera::runlog::read_scalar_events(ev[0]).size(), 120u);
  EXPECT_NE(read_file(run + "/summary.json").find("\"steps\": 60"), std::string::npos);
  EXPECT_EQ(load(run + "/checkpoint/ckpt.tsr").step, 60u);
  // The lock went with the process: a resume in place at the last step now runs (and only
  // evaluates), leaving the logs as they were.
  const std::string before = read_file(run + "/metrics.csv");
  const Result again = train("--steps 60 --batch 8 --seed 1 --resume " + run + " --out " + run);
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(read_file(run + "/metrics.csv"), before);
}

TEST_F(TrainTool, CorruptOrForeignCheckpointIsRefused) {
  const std::string run = path("run");
  const Result r = train("--steps 2 --batch 8 --seed 7 --out " + run);
  ASSERT_EQ(r.status, 0) << r.err;

  // One payload byte flipped (in the last tensor data, before the CRC).
  std::string bytes = read_file(run + "/checkpoint/ckpt.tsr");
  ASSERT_GT(bytes.size(), 64u);
  bytes[bytes.size() - tessera::runlog::kCheckpointCrcBytes - 40] ^= 0x10;
  const std::string bad = path("bad.tsr");
  write_file(bad, bytes);
  const std::string out = path("out");
  const Result rb = train("--steps 4 --batch 8 --seed 7 --resume " + bad + " --out " + out);
  EXPECT_EQ(rb.status, 2) << rb.err;
  EXPECT_NE(rb.err.find("checksum"), std::string::npos) << rb.err;
  EXPECT_NE(rb.err.find(bad), std::string::npos) << "the message names the file: " << rb.err;
  EXPECT_EQ(read_file(bad), bytes) << "the corrupt checkpoint was modified";
  EXPECT_FALSE(exists(out + "/checkpoint/ckpt.tsr"));
  EXPECT_FALSE(exists(out + "/metrics.csv"));

  // Another configuration (batch 16 resuming a batch-8 run).
  const std::string before = read_file(run + "/checkpoint/ckpt.tsr");
  const Result rf = train("--steps 4 --batch 16 --seed 7 --resume " + run + " --out " + out);
  EXPECT_EQ(rf.status, 2) << rf.err;
  EXPECT_NE(rf.err.find("checkpoint is for model"), std::string::npos) << rf.err;
  EXPECT_EQ(read_file(run + "/checkpoint/ckpt.tsr"), before);
  EXPECT_FALSE(exists(out + "/checkpoint/ckpt.tsr"));
}

TEST_F(TrainTool, SameSeedSameLosses) {
  const std::string flags = "--steps 4 --batch 8 --seed 5 --out ";
  const Result r1 = train(flags + path("one"));
  ASSERT_EQ(r1.status, 0) << r1.err;
  const Result r2 = train(flags + path("two"));
  ASSERT_EQ(r2.status, 0) << r2.err;
  const auto one = columns(read_file(path("one/metrics.csv")), 3);
  const auto two = columns(read_file(path("two/metrics.csv")), 3);
  ASSERT_EQ(one.size(), 5u);
  EXPECT_EQ(one, two);
  // and the final weights
  Checkpoint c1, c2;
  ASSERT_NO_THROW(c1 = load(path("one/checkpoint/ckpt.tsr")));
  ASSERT_NO_THROW(c2 = load(path("two/checkpoint/ckpt.tsr")));
  expect_same_checkpoint(c1, c2);
  // a different seed trains differently
  const Result r3 = train("--steps 4 --batch 8 --seed 6 --out " + path("three"));
  ASSERT_EQ(r3.status, 0) << r3.err;
  EXPECT_NE(columns(read_file(path("three/metrics.csv")), 3), one);
}

// A model description file of the example CNN trains exactly as the built-in default (the
// file is read into the same layers, the same spec, the same program): losses and weights.
TEST_F(TrainTool, ModelFileOfTheExampleTrainsAsTheDefault) {
  const std::string flags = "--steps 3 --batch 8 --seed 2 --out ";
  const Result r1 = train(flags + path("default"));
  ASSERT_EQ(r1.status, 0) << r1.err;
  const Result r2 = train("--model " + std::string(TESSERA_SOURCE_DIR) +
                          "/examples/models/example_cnn.json " + flags + path("file"));
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(columns(read_file(path("default/metrics.csv")), 3),
            columns(read_file(path("file/metrics.csv")), 3));
  Checkpoint c1, c2;
  ASSERT_NO_THROW(c1 = load(path("default/checkpoint/ckpt.tsr")));
  ASSERT_NO_THROW(c2 = load(path("file/checkpoint/ckpt.tsr")));
  expect_same_checkpoint(c1, c2);
  EXPECT_NE(read_file(path("file/summary.json")).find("\"model\": \"example_cnn\""),
            std::string::npos);
}

// The example CNN's run exports its weights, and tessera evaluate takes them (through the
// conv + max-pool fusion): the run's own test accuracy and loss.
TEST_F(TrainTool, TheExampleCnnsWeightsEvaluateThroughTheGeneralCompiler) {
  const Result t = train("--steps 4 --batch 16 --seed 4 --out " + path("t"));  // 64 test images
  ASSERT_EQ(t.status, 0) << t.err;
  double loss = 0, acc = 0;
  const size_t at = t.out.find("test accuracy ");
  ASSERT_NE(at, std::string::npos) << t.out;
  ASSERT_EQ(std::sscanf(t.out.c_str() + at, "test accuracy %lf loss %lf", &acc, &loss), 2);
  const Result e = sh(kTessera + " evaluate " + path("t/weights") + " --model " +
                      std::string(TESSERA_SOURCE_DIR) +
                      "/examples/models/example_cnn.json --eval-samples 64 --batch 16");
  ASSERT_EQ(e.status, 0) << e.err;
  double eloss = 0, eacc = 0;
  const size_t ea = e.out.find("test accuracy ");
  ASSERT_NE(ea, std::string::npos) << e.out;
  ASSERT_EQ(std::sscanf(e.out.c_str() + ea, "test accuracy %lf loss %lf", &eacc, &eloss), 2);
  EXPECT_EQ(eacc, acc) << t.out << e.out;
  EXPECT_NEAR(eloss, loss, 1e-5 * loss) << t.out << e.out;
}

// The example CNN takes every optimizer option (SGD with momentum and a cosine schedule; Adam's
// betas; label smoothing), its conv + relu + max-pool fused: on the rtl chip bit-identical to
// the functional backend, the run folder complete.
TEST_F(TrainTool, TheExampleCnnTakesEveryOptimizerOption) {
  const std::string flags =
      "--array 4 --steps 3 --batch 4 --seed 2 --optimizer sgd --lr 0.05 "
      "--momentum 0.9 --lr-schedule cosine ";
  const Result f = train(flags + "--out " + path("f"));
  ASSERT_EQ(f.status, 0) << f.err;
  const Result r = train(flags + "--backend rtl --out " + path("r"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(columns(read_file(path("f/metrics.csv")), 3),
            columns(read_file(path("r/metrics.csv")), 3));
  EXPECT_EQ(read_file(path("f/weights/conv0_kernel.f32")),
            read_file(path("r/weights/conv0_kernel.f32")));
  const std::string summary = read_file(path("f/summary.json"));
  EXPECT_NE(summary.find("\"compiler\": \"DenseStackStep\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"optimizer\": \"sgd\""), std::string::npos) << summary;
  const Result adam = train(
      "--array 4 --steps 2 --batch 4 --beta2 0.99 --label-smoothing 0.1 "
      "--out " +
      path("a"));
  ASSERT_EQ(adam.status, 0) << adam.err;
  EXPECT_NE(read_file(path("a/summary.json")).find("\"label_smoothing\": 0.1"), std::string::npos);
}

// A Dense stack (Flatten -> Dense(24, relu) -> Dense(10, softmax)) trains through the
// Dense-stack compiler: on the rtl chip (N = 4) every step's loss and the exported weights are
// bit-identical to the functional backend's; the first rtl step's cycle report names the
// layers' phases; the weight export (manifest.json + raw fp32 tensors) reproduces the chip's
// test probabilities in a host forward pass in double (tests/reference/dense_ref.py
// export-check does the same in PyTorch, make test-long); what the Dense path does not take
// (a Dropout after a linear layer, data parallelism) is refused with exit status 2, naming
// the layer.
// A convolutional model file (strided same convolution, average and max pooling, a second
// convolution, a hidden Dense layer with Dropout) through the general compiler: rtl and
// functional runs agree byte for byte, the cycle report names the feature layers' phases and
// the export describes every layer.
TEST_F(TrainTool, ConvModelTrainsBitIdenticallyOnRtlAndExportsItsLayers) {
  const std::string model = path("conv.json");
  {
    std::ofstream f(model);
    f << R"({"name": "tiny_conv", "input_shape": [28, 28, 1], "layers": [
      {"class_name": "Conv2D", "filters": 4, "kernel_size": 5, "strides": 2, "padding": "same",
       "activation": "relu"},
      {"class_name": "AveragePooling2D", "pool_size": 2},
      {"class_name": "Conv2D", "filters": 8, "kernel_size": 3, "activation": "relu"},
      {"class_name": "MaxPool2D", "pool_size": 3},
      {"class_name": "Flatten"},
      {"class_name": "Dense", "units": 12, "activation": "relu"},
      {"class_name": "Dropout", "rate": 0.25, "seed": 5},
      {"class_name": "Dense", "units": 10, "activation": "softmax"}]})";
  }
  const std::string flags = "--model " + model + " --array 4 --steps 2 --batch 4 --seed 3 ";
  const Result rf = train(flags + "--backend functional --out " + path("cf"));
  ASSERT_EQ(rf.status, 0) << rf.err;
  const Result rr = train(flags + "--backend rtl --out " + path("cr"));
  ASSERT_EQ(rr.status, 0) << rr.err;
  EXPECT_EQ(columns(read_file(path("cf/metrics.csv")), 3),
            columns(read_file(path("cr/metrics.csv")), 3));
  for (const char* t : {"conv0_kernel.f32", "conv0_bias.f32", "conv1_kernel.f32",
                        "dense2_kernel.f32", "dense3_bias.f32", "test_probs.f32"}) {
    const std::string a = read_file(path("cf/weights/") + t);
    EXPECT_FALSE(a.empty()) << t;
    EXPECT_EQ(a, read_file(path("cr/weights/") + t)) << t;
  }
  const std::string report = read_file(path("cr/cycle_report.txt"));
  for (const char* phase : {"fwd_conv1", "fwd_avgpool2", "fwd_conv3", "fwd_maxpool4",
                            "bwd_maxpool4", "bwd_conv3", "bwd_avgpool2", "bwd_conv1"})
    EXPECT_NE(report.find(phase), std::string::npos) << phase << "\n" << report;
  // The HBM pin columns: the data bus busy at most every cycle, and the phases' REFs together
  // one every tREFI (3,900 cycles, the JEDEC table) of the step, give or take one. The roofline:
  // a phase of some length takes at least 0.9 of its bound (the phases are cut where decode
  // enters them, so a unit's last queued work may spill into the next), and names its unit.
  {
    std::istringstream lines(report);
    std::string line;
    unsigned long long step_cycles = 0;
    uint64_t refs = 0, phases = 0;
    std::getline(lines, line);  // "step S: C cycles; ..."
    ASSERT_EQ(std::sscanf(line.c_str(), "step %*u: %llu cycles", &step_cycles), 1) << line;
    std::getline(lines, line);  // the header
    ASSERT_NE(line.find("HBM bus  R/W turns  REFs"), std::string::npos) << line;
    while (std::getline(lines, line) && line.rfind("(", 0) != 0) {  // to the legend
      std::istringstream f(line);
      std::vector<std::string> t;
      for (std::string w; f >> w;) t.push_back(w);
      ASSERT_EQ(t.size(), 15u) << line;
      const double bus = std::stod(t[12]);
      EXPECT_GE(bus, 0.0) << line;
      EXPECT_LE(bus, 100.0) << line;
      refs += std::stoull(t[14]);
      const uint64_t cycles = std::stoull(t[1]), roof = std::stoull(t[7]);
      EXPECT_TRUE(t[8] == "MXU" || t[8] == "VPU" || t[8] == "DMA" || t[8] == "HBM" ||
                  t[8] == "ICI" || t[8] == "SEQ")
          << line;
      if (roof > 10000) EXPECT_GE(double(cycles), 0.9 * double(roof)) << line;
      ++phases;
    }
    EXPECT_GE(phases, 8u);
    // 16 single-bank refreshes a tREFI (a set owed at the doorbell), at most 32 behind
    EXPECT_LE(refs, 16 * (step_cycles / 3900 + 1)) << report;
    EXPECT_GE(refs + 32, 16 * (step_cycles / 3900)) << report;
  }
  const std::string manifest = read_file(path("cf/weights/manifest.json"));
  for (const char* want :
       {"tessera-sequential-weights-1", "\"input_shape\": [28, 28, 1]", "\"shape\": [5, 5, 1, 4]",
        "\"padding\": \"same\"", "\"class_name\": \"AveragePooling2D\", \"pool_size\": 2",
        "\"shape\": [8, 12]", "\"class_name\": \"Dropout\", \"rate\": 0.25"})
    EXPECT_NE(manifest.find(want), std::string::npos) << want << "\n" << manifest;
  EXPECT_EQ(read_file(path("cf/weights/conv0_kernel.f32")).size(), 5u * 5 * 1 * 4 * 4);
}

// A general-compiler run (a conv net with Dropout, Adam with beta_2 0.99 on a cosine schedule,
// label smoothing 0.1) stopped after
// step 3 and resumed in its own folder ends exactly as the uninterrupted run: the checkpoint's
// every tensor, metrics.csv, the exported weights. The state does not depend on the chip: the
// step-3 checkpoint resumed on the rtl backend into another folder gives the same weights.
TEST_F(TrainTool, GeneralModelResumesBitIdentically) {
  const std::string model = model_file("conv.json", R"(
      {"class_name": "Conv2D", "filters": 4, "kernel_size": 3, "activation": "relu"},
      {"class_name": "MaxPool2D", "pool_size": 2}, {"class_name": "Flatten"},
      {"class_name": "Dense", "units": 12, "activation": "relu"},
      {"class_name": "Dropout", "rate": 0.5},
      {"class_name": "Dense", "units": 10, "activation": "softmax"})");
  const std::string flags = "--model " + model +
                            " --array 4 --steps 6 --batch 4 --seed 3 --lr 3e-3 "
                            "--lr-schedule cosine --beta2 0.99 --label-smoothing 0.1 ";
  const std::string a = path("a"), b = path("b"), c = path("c");
  const Result ra = train(flags + "--checkpoint-every 2 --out " + a);
  ASSERT_EQ(ra.status, 0) << ra.err;
  const Result rb = train(flags + "--stop-after 3 --out " + b);
  ASSERT_EQ(rb.status, 0) << rb.err;
  EXPECT_NE(rb.out.find("stopped after step 3"), std::string::npos) << rb.out;
  EXPECT_FALSE(exists(b + "/summary.json"));
  Checkpoint at3;
  ASSERT_NO_THROW(at3 = load(b + "/checkpoint/ckpt.tsr"));
  EXPECT_EQ(at3.step, 3u);
  const std::string ckpt3 = read_file(b + "/checkpoint/ckpt.tsr");

  // on the rtl chip, into another folder, from the step-3 checkpoint
  const Result rc = train(flags + "--backend rtl --resume " + b + " --out " + c);
  ASSERT_EQ(rc.status, 0) << rc.err;
  EXPECT_NE(rc.out.find("resuming"), std::string::npos) << rc.out;
  EXPECT_EQ(read_file(b + "/checkpoint/ckpt.tsr"), ckpt3) << "the resumed checkpoint changed";
  // another recipe (no label smoothing, asked for) is refused, the checkpoint untouched
  const Result rs = train("--model " + model +
                          " --array 4 --steps 6 --batch 4 --seed 3 --lr 3e-3 --lr-schedule cosine"
                          " --beta2 0.99 --label-smoothing 0 --resume " +
                          b + " --out " + path("s"));
  EXPECT_EQ(rs.status, 2) << rs.err;
  EXPECT_NE(rs.err.find("label_smoothing=0.1"), std::string::npos) << rs.err;
  EXPECT_EQ(read_file(b + "/checkpoint/ckpt.tsr"), ckpt3);
  // in place
  const Result rb2 = train(flags + "--resume " + b + " --out " + b);
  ASSERT_EQ(rb2.status, 0) << rb2.err;

  Checkpoint ca, cb, cc;
  ASSERT_NO_THROW(ca = load(a + "/checkpoint/ckpt.tsr"));
  ASSERT_NO_THROW(cb = load(b + "/checkpoint/ckpt.tsr"));
  ASSERT_NO_THROW(cc = load(c + "/checkpoint/ckpt.tsr"));
  EXPECT_EQ(ca.step, 6u);
  expect_same_checkpoint(ca, cb);
  expect_same_checkpoint(ca, cc);
  EXPECT_EQ(columns(read_file(a + "/metrics.csv"), 5), columns(read_file(b + "/metrics.csv"), 5));
  const auto rows_c = columns(read_file(c + "/metrics.csv"), 3);
  const auto rows_a = columns(read_file(a + "/metrics.csv"), 3);
  ASSERT_EQ(rows_a.size(), 7u);
  ASSERT_EQ(rows_c.size(), 4u);  // the header and steps 3..5
  for (size_t i = 1; i < rows_c.size(); ++i) EXPECT_EQ(rows_c[i], rows_a[3 + i]) << i;
  for (const char* t :
       {"conv0_kernel.f32", "dense1_kernel.f32", "dense2_bias.f32", "test_probs.f32"}) {
    const std::string w = read_file(a + "/weights/" + t);
    EXPECT_FALSE(w.empty()) << t;
    EXPECT_EQ(w, read_file(b + "/weights/" + t)) << t;
    EXPECT_EQ(w, read_file(c + "/weights/" + t)) << t;
  }
  // resumed at its last step it only evaluates: the logs stay as they were
  const std::string before = read_file(b + "/metrics.csv");
  const Result again = train(flags + "--resume " + b + " --out " + b);
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(read_file(b + "/metrics.csv"), before);
  EXPECT_EQ(load(b + "/checkpoint/ckpt.tsr").step, 6u);
}

// --resume DIR takes the run's own configuration from its folder (run.json, model.json): a
// functional run made with --seed 7 and stopped at step 3, resumed with nothing but --steps,
// continues in its own folder on the functional backend and ends exactly as the uninterrupted
// run; a flag given is checked against the run (another seed is refused, naming it). The same
// for a general-compiler model with its optimizer options.
TEST_F(TrainTool, ResumeTakesTheRunsOwnConfiguration) {
  const std::string a = path("a"), b = path("b");
  const std::string flags = "--backend functional --steps 6 --batch 8 --seed 7 ";
  ASSERT_EQ(train(flags + "--stop-after 3 --out " + a).status, 0);
  for (const char* f : {"/run.json", "/model.json"}) EXPECT_TRUE(exists(a + f)) << f;
  ASSERT_EQ(train(flags + "--out " + b).status, 0);
  // no --backend, --seed, --batch or --out: the run's own
  const Result r = sh(kTessera + " train" + kCommon + " --resume " + a + " --steps 6");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resuming"), std::string::npos) << r.out;
  EXPECT_NE(read_file(a + "/summary.json").find("\"backend\": \"functional\""), std::string::npos);
  EXPECT_EQ(read_file(a + "/checkpoint/ckpt.tsr"), read_file(b + "/checkpoint/ckpt.tsr"));
  EXPECT_EQ(columns(read_file(a + "/metrics.csv"), 3), columns(read_file(b + "/metrics.csv"), 3));
  // a flag given that the run contradicts
  const std::string ckpt = read_file(a + "/checkpoint/ckpt.tsr");
  const Result seed = sh(kTessera + " train" + kCommon + " --resume " + a + " --steps 8 --seed 8");
  EXPECT_EQ(seed.status, 2);
  EXPECT_NE(seed.err.find("--seed 7"), std::string::npos) << seed.err;
  EXPECT_EQ(read_file(a + "/checkpoint/ckpt.tsr"), ckpt);

  // a general-compiler model: its model file, optimizer and schedule come from the folder
  const std::string model = model_file("mlp.json", R"({"class_name": "Flatten"},
      {"class_name": "Dense", "units": 16, "activation": "relu"},
      {"class_name": "Dense", "units": 10, "activation": "softmax"})");
  const std::string c = path("c"), d = path("d");
  const std::string mflags = "--model " + model +
                             " --array 4 --steps 6 --batch 4 --seed 3 --optimizer sgd --lr 0.05"
                             " --momentum 0.9 --lr-schedule linear ";
  ASSERT_EQ(train(mflags + "--stop-after 2 --out " + c).status, 0);
  ASSERT_EQ(train(mflags + "--out " + d).status, 0);
  std::filesystem::remove(model);  // the folder's model.json is what a resume reads
  const Result rm = sh(kTessera + " train" + kCommon + " --resume " + c);
  ASSERT_EQ(rm.status, 0) << rm.err;
  EXPECT_EQ(read_file(c + "/checkpoint/ckpt.tsr"), read_file(d + "/checkpoint/ckpt.tsr"));
}

// The line "test accuracy A loss L (N images)" of a run's output.
std::string test_line(const std::string& out) {
  const size_t at = out.find("test accuracy ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// tessera evaluate on a run's weight export gives the run's own test results: the same
// accuracy and loss line, and the same probabilities (test_probs.f32), on the functional
// backend and on the rtl chip (the run trained with label smoothing; its test loss is the plain
// cross-entropy); a folder whose tensors do not fit the model is refused, naming the file.
TEST_F(TrainTool, EvaluateGivesTheTrainingRunsTestResults) {
  const std::string model = model_file("conv.json", R"(
      {"class_name": "Conv2D", "filters": 4, "kernel_size": 3, "activation": "relu"},
      {"class_name": "AveragePooling2D", "pool_size": 2}, {"class_name": "Flatten"},
      {"class_name": "Dense", "units": 12, "activation": "relu"},
      {"class_name": "Dense", "units": 10, "activation": "softmax"})");
  const std::string run = path("run");
  const Result rt = train("--model " + model +
                          " --array 4 --steps 3 --batch 8 --seed 5 --label-smoothing 0.2 "
                          "--out " +
                          run);
  ASSERT_EQ(rt.status, 0) << rt.err;
  const std::string want = test_line(rt.out);
  ASSERT_NE(want.find("(64 images)"), std::string::npos) << rt.out;
  const std::string probs = read_file(run + "/weights/test_probs.f32");
  ASSERT_EQ(probs.size(), 64u * 10 * 4);
  for (const char* backend : {"functional", "rtl"}) {
    const std::string pf = path(std::string("probs_") + backend + ".f32");
    const Result re =
        sh(kTessera + " evaluate " + run + "/weights --model " + model +
           " --array 4 --batch 8 --eval-samples 64 --backend " + backend + " --probs " + pf);
    ASSERT_EQ(re.status, 0) << re.err;
    EXPECT_EQ(test_line(re.out), want) << backend;
    EXPECT_EQ(read_file(pf), probs) << backend;
  }
  // a kernel file one value short
  const std::string bad = path("bad");
  fs::copy(run + "/weights", bad);
  std::string k = read_file(bad + "/conv0_kernel.f32");
  k.resize(k.size() - 4);
  write_file(bad + "/conv0_kernel.f32", k);
  const Result rb = sh(kTessera + " evaluate " + bad + " --model " + model + " --array 4");
  EXPECT_EQ(rb.status, 2) << rb.err;
  EXPECT_NE(rb.err.find(bad + "/conv0_kernel.f32: 140 bytes"), std::string::npos) << rb.err;
}

TEST_F(TrainTool, DenseStackTrainsBitIdenticallyOnRtlAndExportsItsWeights) {
  const std::string model = path("mlp.json");
  {
    std::ofstream f(model);
    f << R"({"name": "tiny_mlp", "input_shape": [28, 28, 1], "layers": [
      {"class_name": "Flatten"},
      {"class_name": "Dense", "units": 24, "activation": "relu"},
      {"class_name": "Dense", "units": 10, "activation": "softmax"}]})";
  }
  // with a cosine schedule: the host writes each step's rate, the same on both backends
  const std::string flags =
      "--model " + model + " --array 4 --steps 3 --batch 8 --seed 3 --lr-schedule cosine ";
  const Result rf = train(flags + "--backend functional --out " + path("f"));
  ASSERT_EQ(rf.status, 0) << rf.err;
  const Result rr = train(flags + "--backend rtl --out " + path("r"));
  ASSERT_EQ(rr.status, 0) << rr.err;
  EXPECT_EQ(columns(read_file(path("f/metrics.csv")), 3),
            columns(read_file(path("r/metrics.csv")), 3));
  for (const char* t :
       {"dense0_kernel.f32", "dense0_bias.f32", "dense1_kernel.f32", "dense1_bias.f32"}) {
    const std::string a = read_file(path("f/weights/") + t);
    EXPECT_FALSE(a.empty()) << t;
    EXPECT_EQ(a, read_file(path("r/weights/") + t)) << t;
  }
  const std::string report = read_file(path("r/cycle_report.txt"));
  for (const char* phase : {"fwd1", "fwd2", "bwd2", "bwd1"})
    EXPECT_NE(report.find(phase), std::string::npos) << report;
  // the run folder holds what the CNN's runs hold: the TensorBoard events (a scalar a step:
  // loss, accuracy, and on rtl the cycles), the curves, the cycle report (the program's
  // statistics; the profiled rtl step's phases), its timeline and roofline
  for (const char* dir : {"f", "r"}) {
    bool events = false;
    for (const auto& e : fs::directory_iterator(path(dir)))
      events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 &&
                fs::file_size(e.path()) > 0;
    EXPECT_TRUE(events) << dir;
    EXPECT_GT(read_file(path(dir) + "/loss.png").size(), 100u) << dir;
    EXPECT_NE(read_file(path(dir) + "/cycle_report.txt").find("\nprogram: "), std::string::npos);
  }
  EXPECT_NE(read_file(path("r/timeline.json")).find("traceEvents"), std::string::npos);
  EXPECT_GT(read_file(path("r/roofline.png")).size(), 100u);
  EXPECT_FALSE(exists(path("f/timeline.json"))) << "no rtl step, no timeline";
  EXPECT_NE(read_file(path("f/summary.json")).find("\"compiler\": \"DenseStackStep\""),
            std::string::npos);
  EXPECT_NE(read_file(path("f/summary.json")).find("\"lr_schedule\": \"cosine\""),
            std::string::npos);

  // the export: a host forward pass from the files alone
  const std::string manifest = read_file(path("f/weights/manifest.json"));
  EXPECT_NE(manifest.find("tessera-dense-weights-1"), std::string::npos);
  EXPECT_NE(manifest.find("\"shape\": [784, 24]"), std::string::npos) << manifest;
  auto floats = [&](const std::string& file) {
    const std::string b = read_file(path("f/weights/") + file);
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
  };
  const auto k0 = floats("dense0_kernel.f32"), b0 = floats("dense0_bias.f32");
  const auto k1 = floats("dense1_kernel.f32"), b1 = floats("dense1_bias.f32");
  const auto probs = floats("test_probs.f32");
  ASSERT_EQ(k0.size(), 784u * 24);
  ASSERT_EQ(probs.size(), 64u * 10);  // --eval-samples 64
  std::ifstream img(kData + "/t10k-images-idx3-ubyte", std::ios::binary);
  std::string pixels;
  if (img) {
    pixels = read_file(kData + "/t10k-images-idx3-ubyte").substr(16);
  } else {
    const Result un = sh("(gzip -dc " + kData + "/t10k-images-idx3-ubyte.gz | head -c " +
                         std::to_string(16 + 64 * 784) + " > " + path("t10k.raw") + ")");
    ASSERT_EQ(un.status, 0) << un.err;
    pixels = read_file(path("t10k.raw")).substr(16);
  }
  double worst = 0;
  for (int s = 0; s < 64; ++s) {
    std::vector<double> h(24), z(10);
    for (int u = 0; u < 24; ++u) {
      double a = b0[u];
      for (int k = 0; k < 784; ++k)
        a += static_cast<uint8_t>(pixels[s * 784 + k]) / 255.0 * k0[k * 24 + u];
      h[u] = std::max(a, 0.0);
    }
    double m = -1e300, sum = 0;
    for (int c = 0; c < 10; ++c) {
      z[c] = b1[c];
      for (int u = 0; u < 24; ++u) z[c] += h[u] * k1[u * 10 + c];
      m = std::max(m, z[c]);
    }
    for (int c = 0; c < 10; ++c) sum += std::exp(z[c] - m);
    for (int c = 0; c < 10; ++c)
      worst = std::max(worst, std::fabs(std::exp(z[c] - m) / sum - probs[s * 10 + c]));
  }
  EXPECT_LT(worst, 2e-2);  // the chip rounds MXU operands and activations to bf16

  // refusals: a Dropout layer (named), data parallelism
  const std::string drop = path("drop.json");
  {
    std::ofstream f(drop);
    f << R"({"name": "d", "input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
      {"class_name": "Dense", "units": 8, "activation": "linear"},
      {"class_name": "Dropout", "rate": 0.5},
      {"class_name": "Dense", "units": 10, "activation": "softmax"}]})";
  }
  const Result d = train("--model " + drop + " --steps 1 --out " + path("d"));
  EXPECT_EQ(d.status, 2);
  EXPECT_NE(d.err.find("layer 2 (Dropout): Dropout is lowered after a hidden relu Dense layer"),
            std::string::npos)
      << d.err;
}

// The sampled backend: every step on the functional model, every K-th also on the rtl chip from
// the same state, checked bit-identical; the rtl step is timed and sampled for the per-phase
// report and the Chrome-trace timeline.
// --backend sampled, for the example CNN and for a general-compiler model.
TEST_F(TrainTool, SampledRunChecksRtlAgainstFunctionalAndReportsCycles) {
  const Result r =
      train("--backend sampled --array 16 --batch 1 --steps 3 --sample-every 2 --out " + path("s"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string summary = read_file(path("s/summary.json"));
  EXPECT_NE(summary.find("\"sampled_steps\": 2"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"step_cycles_identical\": true"), std::string::npos) << summary;
  const std::string report = read_file(path("s/cycle_report.txt"));
  for (const char* phase : {"fwd_conv1", "fwd1", "bwd1", "bwd_conv1"})
    EXPECT_NE(report.find(phase), std::string::npos) << phase << "\n" << report;
  // The timeline parses as JSON and has the program phases and the three unit tracks.
  const Result j =
      sh("/usr/bin/python3 -c \"import json,sys; d=json.load(open('" + path("s/timeline.json") +
         "')); names={e['name'] for e in d['traceEvents']}; "
         "print(int({'bwd_conv1','busy','held by WAIT'} <= names))\"");
  EXPECT_EQ(j.out, "1\n") << j.err;
  const Result rep = sh(kTessera + " report " + path("s"));
  EXPECT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(rep.out.find("per phase"), std::string::npos) << rep.out;

  // a general-compiler model the same way: every step on the functional model, steps 0 and 2
  // also on the rtl chip from its HBM, checked bit-identical and timed; the losses are the
  // functional run's
  const std::string model = model_file("mlp.json", R"({"class_name": "Flatten"},
      {"class_name": "Dense", "units": 16, "activation": "relu"},
      {"class_name": "Dense", "units": 10, "activation": "softmax"})");
  const std::string flags = "--model " + model + " --array 4 --batch 8 --steps 4 --seed 5 ";
  const Result ms = train(flags + "--backend sampled --sample-every 2 --out " + path("ms"));
  ASSERT_EQ(ms.status, 0) << ms.err;
  const Result mf = train(flags + "--out " + path("mf"));
  ASSERT_EQ(mf.status, 0) << mf.err;
  EXPECT_EQ(columns(read_file(path("ms/metrics.csv")), 3),
            columns(read_file(path("mf/metrics.csv")), 3));
  const auto rows = lines(read_file(path("ms/metrics.csv")));
  ASSERT_EQ(rows.size(), 5u);
  for (size_t i = 1; i < rows.size(); ++i)  // step_cycles: timed on steps 0 and 2 only
    EXPECT_EQ(split(rows[i], ',').at(4) != "0", (i - 1) % 2 == 0) << rows[i];
  const std::string msum = read_file(path("ms/summary.json"));
  EXPECT_NE(msum.find("\"sampled_steps\": 2"), std::string::npos) << msum;
  EXPECT_NE(msum.find("\"backend\": \"sampled\""), std::string::npos) << msum;
  EXPECT_NE(read_file(path("ms/cycle_report.txt")).find("bwd1"), std::string::npos);
}

// --chips: data parallelism over a ring of chips (functional here; the rtl ring is checked bit
// for bit against the functional ring in tests/rtl/test_ring.cc). The losses track one chip's
// on the same global batch (docs/multichip.md, "Equivalence"); a global batch the replicas do
// not divide is refused before training.
TEST_F(TrainTool, ChipsTrainDataParallelLikeOneChip) {
  const std::string flags = "--steps 4 --batch 8 --seed 2 --out ";
  const Result one = train(flags + path("one"));
  ASSERT_EQ(one.status, 0) << one.err;
  const Result two = train("--chips 2 " + flags + path("two"));
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("2 chips (data parallel, 4 images each)"), std::string::npos) << two.out;
  EXPECT_NE(read_file(path("two/summary.json")).find("\"chips\": 2"), std::string::npos);
  const auto a = lines(read_file(path("one/metrics.csv")));
  const auto b = lines(read_file(path("two/metrics.csv")));
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 1; i < a.size(); ++i) {
    const auto x = split(a[i], ','), y = split(b[i], ',');
    EXPECT_NEAR(std::stod(x[1]), std::stod(y[1]), 1e-5 * std::stod(x[1])) << "step " << i - 1;
    EXPECT_EQ(x[2], y[2]) << "accuracy, step " << i - 1;
  }
  const Result bad = train("--chips 3 --steps 1 --batch 8 --out " + path("bad"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("not a positive multiple of the 3 replicas"), std::string::npos) << bad.err;
  // a resume takes the run's 2 chips (run.json); asked for one chip, it continues there (every
  // replica holds the whole state: a checkpoint is the same tensors on any number of chips),
  // with step 5's loss within the summation order of the 2-chip resume's
  const Result resume = train("--steps 5 --resume " + path("two") + " --out " + path("three"));
  ASSERT_EQ(resume.status, 0) << resume.err;
  EXPECT_NE(read_file(path("three/summary.json")).find("\"chips\": 2"), std::string::npos);
  const Result one_chip =
      train("--steps 5 --chips 1 --resume " + path("two") + " --out " + path("four"));
  ASSERT_EQ(one_chip.status, 0) << one_chip.err;
  EXPECT_NE(read_file(path("four/summary.json")).find("\"chips\": 1"), std::string::npos);
  const auto r2 = lines(read_file(path("three/metrics.csv"))),
             r1 = lines(read_file(path("four/metrics.csv")));
  ASSERT_EQ(r2.size(), 2u);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_NEAR(std::stod(split(r1[1], ',')[1]), std::stod(split(r2[1], ',')[1]),
              1e-5 * std::stod(split(r2[1], ',')[1]));
}

// Data parallelism for any model: the two-conv network (hidden Dense, Dropout) and the MLP on
// 2 chips track one chip on the same global batch, step by step (only the order of the sums
// over samples differs; Dropout draws each global sample's own mask).
TEST_F(TrainTool, AnyModelTrainsDataParallel) {
  for (const char* m : {"two_conv_cnn.json", "mlp.json"}) {
    SCOPED_TRACE(m);
    const std::string flags = std::string("--model examples/models/") + m +
                              " --array 4 --steps 3 --batch 8 --seed 3 --out ";
    const Result one = train(flags + path(std::string(m) + ".1"));
    ASSERT_EQ(one.status, 0) << one.err;
    const Result two = train("--chips 2 " + flags + path(std::string(m) + ".2"));
    ASSERT_EQ(two.status, 0) << two.err;
    const auto a = lines(read_file(path(std::string(m) + ".1/metrics.csv")));
    const auto b = lines(read_file(path(std::string(m) + ".2/metrics.csv")));
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    for (size_t i = 1; i < a.size(); ++i) {
      const auto x = split(a[i], ','), y = split(b[i], ',');
      EXPECT_NEAR(std::stod(x[1]), std::stod(y[1]), 1e-5 * std::stod(x[1])) << "step " << i - 1;
    }
  }
}

// --arith host: the host-arithmetic build of the N = 16 chip trains exactly as the pure-RTL
// build does — every step's loss, accuracy and cycle count, and the checkpoint, byte for byte
// (tests/rtl/test_host_arith.cc proves the builds equal on vectors and whole steps).
TEST_F(TrainTool, HostArithmeticBuildTrainsBitIdenticallyToTheRtlBuild) {
  const std::string flags = "--backend rtl --array 16 --steps 2 --batch 2 --seed 4 --out ";
  const Result rtl = train("--arith rtl " + flags + path("rtl"));
  ASSERT_EQ(rtl.status, 0) << rtl.err;
  const Result host = train("--arith host " + flags + path("host"));
  ASSERT_EQ(host.status, 0) << host.err;
  EXPECT_NE(read_file(path("host/summary.json")).find("\"arith\": \"host\""), std::string::npos);
  const auto a = lines(read_file(path("rtl/metrics.csv")));
  const auto b = lines(read_file(path("host/metrics.csv")));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 1; i < a.size(); ++i) {
    auto x = split(a[i], ','), y = split(b[i], ',');
    x.pop_back();  // wall_seconds
    y.pop_back();
    EXPECT_EQ(x, y) << "step " << i - 1 << ": step, loss, accuracy, epoch, cycles, utilization";
  }
  EXPECT_EQ(read_file(path("rtl/checkpoint/ckpt.tsr")),
            read_file(path("host/checkpoint/ckpt.tsr")));
}

// The MPI mode: `mpirun -np P tessera train --chips P` (one verilated chip per rank) against the
// threaded mode (all chips in one process): metrics (with every step's cycle count) and the
// checkpoint byte for byte, with 2 and 4 chips (N = 16, one image per chip, one step).
const std::string kMpirun = "mpirun --allow-run-as-root --oversubscribe";

// --chips P under mpirun (one chip a rank) against P chips on threads, byte for byte: the
// example CNN on 2 and 4 chips, the MLP and the two-conv network on 2.
struct MpiCase {
  int chips;
  const char* model;  // examples/models/ file, or "" (the example CNN)
};
class TrainMpi : public TrainTool, public ::testing::WithParamInterface<MpiCase> {};

TEST_P(TrainMpi, MpiRanksMatchThreadsBitForBit) {
  const int chips = GetParam().chips;
  const std::string model = GetParam().model;
  const std::string flags =
      "--backend rtl --array 16 --chips " + std::to_string(chips) + " --batch " +
      std::to_string(chips) + " --steps 1 --seed 3 " +
      (model.empty() ? std::string() : "--model " + std::string(TESSERA_SOURCE_DIR) +
                                           "/examples/models/" + model + " ") +
      "--out ";
  const Result t = train(flags + path("threads"));
  ASSERT_EQ(t.status, 0) << t.err;
  const Result m =
      sh(kMpirun + " -np " + std::to_string(chips) + " " + train_cmd(flags + path("mpi")));
  ASSERT_EQ(m.status, 0) << m.out << m.err;
  EXPECT_EQ(columns(read_file(path("threads/metrics.csv")), 5),
            columns(read_file(path("mpi/metrics.csv")), 5));
  EXPECT_EQ(read_file(path("threads/checkpoint/ckpt.tsr")),
            read_file(path("mpi/checkpoint/ckpt.tsr")));
  EXPECT_FALSE(exists(path("mpi/.rank1"))) << "the other ranks' scratch folders are removed";
}

INSTANTIATE_TEST_SUITE_P(Chips, TrainMpi,
                         ::testing::Values(MpiCase{2, ""}, MpiCase{4, ""},
                                           MpiCase{2, "mlp.json"},
                                           MpiCase{2, "two_conv_cnn.json"}),
                         [](const auto& info) {
                           std::string m = info.param.model;
                           m = m.empty() ? "example_cnn" : m.substr(0, m.find('.'));
                           return std::to_string(info.param.chips) + "_" + m;
                         });

// A rank that dies (SIGKILL at its first step, or after a checkpoint: the job then resumes bit
// for bit) ends the job within seconds with an error, never a hang; a rank started with other
// options, or a rank count other than --chips, is refused at start-up.
TEST_F(TrainTool, MpiFaultsEndTheJob) {
  const std::string flags = "--backend rtl --array 16 --chips 2 --batch 2 --steps 3 --out ";
  const auto t0 = std::chrono::steady_clock::now();
  const Result k = sh("TESSERA_TEST_KILL=1:0 timeout 120 " + kMpirun + " -np 2 " +
                      train_cmd(flags + path("killed")));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(k.status, 0);
  EXPECT_NE(k.status, 124) << "timed out: the surviving rank hung";
  EXPECT_LT(secs, 60.0);
  EXPECT_NE((k.out + k.err).find("rank 1"), std::string::npos) << k.out << k.err;

  // killed mid-run after a checkpoint, the job resumes under mpirun from nothing but --resume
  // (the run's options from its folder) and ends bit for bit as the uninterrupted run
  const Result mid = sh("TESSERA_TEST_KILL=1:2 timeout 120 " + kMpirun + " -np 2 " +
                        train_cmd(flags + path("mid") + " --checkpoint-every 1"));
  EXPECT_NE(mid.status, 0);
  EXPECT_NE(mid.status, 124) << "timed out: the surviving rank hung";
  ASSERT_TRUE(exists(path("mid/checkpoint/ckpt.tsr"))) << mid.out << mid.err;
  const Result resumed =
      sh(kMpirun + " -np 2 " + kTessera + " train" + kCommon + " --resume " + path("mid"));
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  const Result whole = train(flags + path("whole") + " --checkpoint-every 1");
  ASSERT_EQ(whole.status, 0) << whole.err;
  EXPECT_EQ(read_file(path("mid/checkpoint/ckpt.tsr")),
            read_file(path("whole/checkpoint/ckpt.tsr")));
  EXPECT_EQ(columns(read_file(path("mid/metrics.csv")), 3),
            columns(read_file(path("whole/metrics.csv")), 3));

  const Result mism = sh(kMpirun + " -np 1 " + train_cmd(flags + path("a") + " --seed 1") +
                         " : -np 1 " + train_cmd(flags + path("a") + " --seed 2"));
  EXPECT_NE(mism.status, 0);
  EXPECT_NE(mism.err.find("rank 1 was started with other options than rank 0"), std::string::npos)
      << mism.err;

  const Result np =
      sh(kMpirun + " -np 2 " +
         train_cmd("--backend rtl --array 16 --chips 4 --batch 4 --steps 1 --out " + path("np")));
  EXPECT_NE(np.status, 0);
  EXPECT_NE(np.err.find("mpirun started 2 ranks for --chips 4"), std::string::npos) << np.err;
}

}  // namespace
