// tessera train (train_tool.h).
#include "sw/tools/train_tool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "sw/compiler/graph.h"
#include "sw/runlog/file_util.h"
#include "sw/tools/evaluate_tool.h"
#include "sw/tools/run_folder.h"
#include "sw/tools/run_options.h"
#include "sw/tools/run_tool.h"
#include "sw/tools/step_report.h"
#include "sw/tools/train_callbacks.h"
#include "tessera/checkpoint.h"
#include "tessera/isa_gen.h"
#include "tessera/keras.h"
#include "tessera/metrics.h"
#include "tessera/model_file.h"
#include "tessera/mpi_ring.h"
#include "tessera/plot.h"
#include "tessera/tfevents.h"

namespace tessera::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::string timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

void mkdirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error(cur + ": cannot create: " + std::strerror(errno));
  }
}

// Checkpoint <-> model state.
// `loss` and `accuracy` (of the last step taken) go into the checkpoint's meta, so that a run
// resumed at its final step reports them in summary.json as the uninterrupted run does.
std::string g9(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
// Every option that changes what a run computes, for the ranks' start-up check under mpirun.
std::string options_signature(const TrainOptions& o) {
  std::ostringstream s;
  s << o.backend << "|" << o.steps << "|" << o.epochs << "|" << o.batch << "|" << o.array << "|"
    << o.chips << "|" << o.channels << "|" << o.arith << "|" << o.seed << "|" << o.model << "|"
    << o.data << "|" << o.resume << "|" << o.sample_every << "|" << o.checkpoint_every << "|"
    << o.eval_samples << "|" << o.eval_backend << "|" << o.stop_after;
  return s.str();
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Tests of the MPI mode's fault handling: TESSERA_TEST_KILL=RANK:STEP kills that rank (SIGKILL,
// as a crash would) when it reaches that step.
void maybe_die(uint64_t step) {
  const char* k = std::getenv("TESSERA_TEST_KILL");
  if (!k) return;
  int r = -1;
  unsigned long long s = 0;
  if (std::sscanf(k, "%d:%llu", &r, &s) == 2 && r == mpi::rank() && s == step) ::raise(SIGKILL);
}

}  // namespace

std::string idx_path(const std::string& dir, const char* name) {
  const std::string file = dir + "/" + name;
  return ::access(file.c_str(), F_OK) == 0 ? file : file + ".gz";
}

std::string image_size_error(const std::string& dir, const char* name, const data::Dataset& set,
                             uint32_t h, uint32_t w) {
  if (set.rows == h && set.cols == w) return "";
  return idx_path(dir, name) + ": offset 0x8: images are " + std::to_string(set.rows) + "x" +
         std::to_string(set.cols) + ", the model takes " + std::to_string(h) + "x" +
         std::to_string(w);
}

int train(const TrainOptions& given, std::ostream& out_all, std::ostream& err) {
  // ---- a resume takes the run's own configuration from its folder (run_options.h) ----
  TrainOptions opt = given;
  if (const std::string why = apply_run_options(opt); !why.empty()) {
    err << "tessera train: " << why << "\n";
    return 2;
  }
  // ---- under mpirun: one chip per rank; the same options everywhere; rank 0 reports ----
  const bool distributed = mpi::launched();
  const int rank = mpi::rank();
  std::ostream null_out(nullptr);
  std::ostream& out = rank == 0 ? out_all : null_out;
  if (distributed) {
    const uint64_t h = fnv1a(options_signature(opt));
    std::vector<uint8_t> mine(8);
    std::memcpy(mine.data(), &h, 8);
    const auto all = mpi::allgather(mine);
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] != all[0]) {
        err << "tessera train: rank " << r << " was started with other options than rank 0 "
            << "(every rank must run the same command)\n";
        return 2;
      }
    }
    if (opt.backend != "rtl") {
      err << "tessera train: under mpirun the rtl backend runs one chip per rank; --backend "
          << opt.backend << " runs every chip in one process: run it without mpirun\n";
      return 2;
    }
    if (mpi::size() != opt.chips) {
      err << "tessera train: mpirun started " << mpi::size() << " ranks for --chips " << opt.chips
          << ": one rank per chip\n";
      return 2;
    }
  }
  // ---- everything that can be wrong with the input is checked before training starts ----
  driver::Backend backend, eval_backend;
  driver::Arith arith;
  const bool sampled = opt.backend == "sampled";
  try {
    backend = sampled ? driver::Backend::kFunctional : driver::parse_backend(opt.backend);
    eval_backend = driver::parse_backend(opt.eval_backend);
    arith = driver::parse_arith(opt.arith);
  } catch (const std::exception& e) {
    err << "tessera train: " << e.what() << "\n";
    return 2;
  }
  // The model: a description file, or the example CNN; refused here, before any long work,
  // when it is malformed or when the chip compiler does not lower it.
  keras::ModelDescription model_desc = keras::example_cnn();
  if (!opt.model.empty()) {
    try {
      model_desc = keras::load_model_description(opt.model);
    } catch (const std::exception& e) {
      err << "tessera train: " << e.what() << "\n";
      return 2;
    }
  }
  const std::string who = opt.model.empty() ? "the example CNN" : opt.model;
  auto refuse = [&](const std::string& why) {
    err << "tessera train: " << who << ": " << why << "\n";
    return 2;
  };
  // The optimizer (Keras's defaults: Adam 1e-3, SGD 0.01), its schedule and the loss's label
  // smoothing; the schedule's decay steps are the run's, set once they are known.
  compiler::OptimizerSpec os;
  if (opt.optimizer == "sgd") {
    if (!opt.default_betas()) return refuse("--beta1/--beta2 are Adam's");
    os.kind = compiler::OptimizerSpec::Kind::kSgd;
    os.lr = opt.lr > 0 ? opt.lr : 0.01f;
    os.momentum = opt.momentum;
  } else if (opt.optimizer == "adam") {
    os.lr = opt.lr > 0 ? opt.lr : 1e-3f;
    os.beta1 = opt.beta1;
    os.beta2 = opt.beta2;
    if (!(os.beta1 >= 0 && os.beta1 < 1) || !(os.beta2 >= 0 && os.beta2 < 1))
      return refuse("--beta1/--beta2: in [0, 1)");
  } else {
    return refuse("--optimizer " + opt.optimizer + ": adam or sgd");
  }
  os.label_smoothing = opt.label_smoothing;
  try {
    os.schedule = compiler::parse_schedule(opt.lr_schedule);
    // The graph passes (build, autodiff, numerics, fuse, lower) refuse an op with no lowering,
    // naming the layer; the step compiler refuses what does not fit the chip in compile().
    compiler::compile_graph(keras::dense_stack_spec(model_desc.layers), os.kind,
                            driver::chip_for_array(opt.array),
                            opt.batch / static_cast<uint32_t>(std::max(1, opt.chips)));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  const std::array<uint32_t, 3> in_shape = model_desc.layers.front().input_shape;
  if (opt.steps == 0 && opt.epochs == 0) {
    err << "tessera train: --epochs 0 (and no --steps): nothing to train\n";
    return 2;
  }
  if (sampled && opt.sample_every < 1) {
    err << "tessera train: --sample-every must be at least 1\n";
    return 2;
  }
  const std::string data_dir = opt.data.empty() ? data::default_data_dir() : opt.data;
  data::Dataset train_set, test_set;
  try {
    train_set = data::load_mnist(data_dir, data::Split::kTrain);
    test_set = data::load_mnist(data_dir, data::Split::kTest);
  } catch (const std::exception& e) {
    err << "tessera train: dataset: " << e.what() << "\n";
    if (opt.data.empty())
      err << "  (the default data is Debian's dataset-fashion-mnist: apt-get install "
             "dataset-fashion-mnist, or pass --data DIR)\n";
    return 2;
  }
  // The model takes images of its input_shape (28x28 for the example): an IDX file of other
  // dimensions is refused here, naming the file and the offset of its dimensions (the loader
  // accepts any size).
  for (const auto& [set, name] :
       {std::pair<const data::Dataset*, const char*>{&train_set, "train-images-idx3-ubyte"},
        {&test_set, "t10k-images-idx3-ubyte"}}) {
    const std::string bad = image_size_error(data_dir, name, *set, in_shape[0], in_shape[1]);
    if (bad.empty()) continue;
    err << "tessera train: dataset: " << bad << "\n";
    return 2;
  }
  if (in_shape[2] > 1)
    return refuse("input_shape " + std::to_string(in_shape[0]) + "x" + std::to_string(in_shape[1]) +
                  "x" + std::to_string(in_shape[2]) + ": the dataset's images have one channel");
  if (opt.eval_samples && opt.eval_samples < test_set.count) {
    const size_t px = size_t{test_set.rows} * test_set.cols;
    test_set.count = static_cast<uint32_t>(opt.eval_samples);
    test_set.images.resize(test_set.count * px);
    test_set.labels.resize(test_set.count);
  }

  data::PipelineConfig pc;
  pc.batch = opt.batch;
  pc.seed = opt.seed;
  pc.shuffle_buffer = train_set.count;
  pc.prefetch = 2;
  uint64_t per_epoch = 0;
  {
    const data::Pipeline probe(train_set, pc);  // (fit() runs the run's own)
    per_epoch = probe.batches_per_epoch();
  }
  const uint64_t total = opt.steps ? opt.steps : opt.epochs * per_epoch;
  os.decay_steps = total;  // the schedule spans the run
  // The model, replicated on --chips chips (one chip: the strategy is a single replica).
  const keras::TPUStrategy strategy(opt.chips, opt.threads);
  auto make_model = [&](bool replicated = true) {
    return std::make_unique<keras::Sequential>(model_desc.layers,
                                               replicated ? strategy : keras::TPUStrategy(1));
  };
  auto compile = [&](keras::Sequential& m, driver::Backend be, uint32_t batch) {
    keras::DeviceOptions d;
    d.backend = be;
    d.array = opt.array;
    d.channels = opt.channels;
    d.arith = arith;
    m.compile(os, "sparse_categorical_crossentropy", {"accuracy"}, d, batch, opt.seed);
  };
  std::unique_ptr<keras::Sequential> model = make_model(), shadow;
  data::Pipeline::Position start{};
  uint64_t first_step = 0;
  double last_loss = 0, last_acc = 0;  // of the last step taken (a checkpoint's, on resume)
  try {
    compile(*model, backend, opt.batch);
    if (sampled) {
      shadow = make_model();
      compile(*shadow, driver::Backend::kRtl, opt.batch);
    }
    if (!opt.resume.empty()) {
      std::string path = opt.resume;
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/checkpoint/ckpt.tsr";
      const runlog::Checkpoint c = runlog::load_checkpoint(path, model->signature());
      compiler::DenseParams p;
      compiler::DenseOptState a;
      from_checkpoint(c, path, *model, p, a);
      if (c.seed != opt.seed)
        throw std::invalid_argument("checkpoint " + path + " was written with --seed " +
                                    std::to_string(c.seed) + ", this run has --seed " +
                                    std::to_string(opt.seed));
      model->set_state(p, a);
      first_step = c.step;
      model->set_step(first_step);  // the schedule's step count
      for (const auto& [key, value] : c.meta) {
        // floats (a step's loss and accuracy are), written %.9g: strtof gives them back
        if (key == "loss") last_loss = std::strtof(value.c_str(), nullptr);
        if (key == "accuracy") last_acc = std::strtof(value.c_str(), nullptr);
      }
      start = {c.data_epoch, c.data_index};
      out << "resuming " << path << " at step " << first_step << " (epoch " << start.epoch
          << ", batch " << start.index << ")\n";
    }
  } catch (const std::exception& e) {
    err << "tessera train: " << e.what() << "\n";
    return 2;
  }

  if (start.index >= per_epoch) {
    err << "tessera train: the checkpoint's data position (epoch " << start.epoch << ", batch "
        << start.index << ") is past an epoch's " << per_epoch << " batches\n";
    return 2;
  }
  // A checkpoint at the last step (a run killed after training, during its evaluation or its
  // run-folder writes) finishes the run: no step, then the evaluation and the files.
  if (first_step > total) {
    err << "tessera train: the checkpoint is at step " << first_step << ", past this run's "
        << total << " steps (--steps / --epochs)\n";
    return 2;
  }

  // Under mpirun only rank 0 writes the run folder; the others keep theirs in a scratch folder
  // inside it, removed at the end (their checkpoints equal rank 0's: every rank gathers the
  // same state from the chips that own its parts).
  std::string main_dir = opt.out.empty() ? "runs/" + timestamp() : opt.out;
  if (distributed && opt.out.empty()) {  // rank 0's timestamp for every rank
    std::vector<uint8_t> name(256, 0);
    std::memcpy(name.data(), main_dir.data(), std::min<size_t>(255, main_dir.size()));
    const auto all = mpi::allgather(name);
    main_dir = reinterpret_cast<const char*>(all[0].data());
  }
  const std::string run_dir = rank == 0 ? main_dir : main_dir + "/.rank" + std::to_string(rank);
  // A rank's scratch folder goes however the run ends.
  struct ScratchRemover {
    std::string dir;
    ~ScratchRemover() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } scratch{rank == 0 ? std::string() : run_dir};
  // One run at a time in a folder: rank 0 locks it before writing anything there (the other
  // ranks write only their scratch folders, and only once rank 0 holds the lock).
  RunFolderLock lock;
  {
    std::string why;
    bool locked = true;
    if (rank == 0) {
      try {
        runlog::make_dirs(run_dir);  // refuses an --out that is a file, naming it
        locked = lock.acquire(run_dir, why);
      } catch (const std::exception& e) {
        why = e.what();
        locked = false;
      }
    }
    if (distributed) locked = mpi::allgather({static_cast<uint8_t>(locked)})[0][0] != 0;
    if (!locked) {
      if (rank == 0) err << "tessera train: " << why << "\n";
      return 2;
    }
  }
  // Resuming in place (--resume DIR --out DIR) continues the folder's metrics.csv and event
  // file from the checkpoint's step (the rows a killed run logged after its checkpoint go); any
  // other run starts them afresh. Either way the tmp files of writers killed mid-write go.
  const bool in_place = rank == 0 && same_folder(resume_run_dir(opt.resume), run_dir);
  const std::vector<std::string> columns = {"epoch", "step_cycles", "mxu_utilization",
                                            "wall_seconds"};
  std::unique_ptr<runlog::MetricsCsv> csv_writer;
  std::unique_ptr<runlog::EventWriter> event_writer;
  try {
    if (rank != 0) std::filesystem::remove_all(run_dir);  // a killed rank's old scratch
    mkdirs(run_dir + "/checkpoint");
    remove_stale_tmp_files(run_dir);
    remove_stale_tmp_files(run_dir + "/checkpoint");
    if (in_place) {
      const auto at = static_cast<int64_t>(first_step);
      csv_writer = std::make_unique<runlog::MetricsCsv>(run_dir, columns, at);
      event_writer = std::make_unique<runlog::EventWriter>(run_dir, at);
    } else {
      remove_event_files(run_dir);
      csv_writer = std::make_unique<runlog::MetricsCsv>(run_dir, columns);
      event_writer = std::make_unique<runlog::EventWriter>(run_dir);
    }
  } catch (const std::exception& e) {
    err << "tessera train: " << e.what() << "\n";
    return 2;
  }
  runlog::MetricsCsv& csv = *csv_writer;
  // The run's configuration (what --resume DIR takes), once its folder has passed the checks.
  if (rank == 0) write_run_options(run_dir, opt, keras::model_description_json(model_desc));
  runlog::EventWriter& events = *event_writer;
  const int n = opt.array;
  const compiler::DenseStackStep& step_prog = model->train_step();
  out << model->summary() << "backend " << opt.backend << ", array " << n << "x" << n << ", "
      << (opt.chips > 1 ? std::to_string(opt.chips) + " chips (data parallel, " +
                              std::to_string(opt.batch / opt.chips) + " images each), "
                        : std::string())
      << "batch " << opt.batch << ", " << total << " steps (" << per_epoch << " a epoch), program "
      << step_prog.stats().instructions << " instructions\nrun folder " << run_dir << "\n";

  // The steps: the model's fit() with the run folder's callbacks (sw/tools/train_callbacks.h).
  std::unique_ptr<SampleOrder> order;
  if (!opt.dump_init.empty()) {  // the initial weights (the export format) and the sample order
    export_dense_weights(opt.dump_init, model_desc.name, model->spec(), model->get_weights());
    order = std::make_unique<SampleOrder>(opt.dump_init + "/order.u32");
    out << "wrote the initial weights to " << opt.dump_init << "\n";
  }
  // The first rtl step is sampled for the per-phase report and the timeline (under mpirun rank
  // 0 reports: its chip 0 is sampled).
  keras::Sequential* rtl_model =
      backend == driver::Backend::kRtl ? model.get() : (sampled ? shadow.get() : nullptr);
  RunLog::Config rc;
  rc.dir = run_dir;
  rc.seed = opt.seed;
  rc.checkpoint_every = opt.checkpoint_every;
  rc.total_steps = total;
  rc.batches_per_epoch = per_epoch;
  rc.first_step = first_step;
  rc.start = start;
  rc.last_loss = last_loss;
  rc.last_accuracy = last_acc;
  rc.n = opt.array;
  rc.profiled = rank == 0 ? rtl_model : nullptr;
  rc.progress = opt.progress && rank == 0 ? &err : nullptr;
  RunLog run_log(rc, csv, events, err);
  std::unique_ptr<SampledCheck> sampled_check;
  if (sampled) sampled_check = std::make_unique<SampledCheck>(*shadow, opt.sample_every);
  struct MpiKillHook : keras::Callback {  // tests: a rank killed at a step (maybe_die)
    void on_batch_begin(keras::Sequential& m, const data::Batch&) override { maybe_die(m.step()); }
  } kill_hook;
  // --waves: the chip armed just before the step's batch goes in (its run is the next).
  struct WaveHook : keras::Callback {
    const TrainOptions& o;
    bool armed = false;
    explicit WaveHook(const TrainOptions& opt) : o(opt) {}
    void on_batch_begin(keras::Sequential& m, const data::Batch&) override {
      if (armed || o.waves.empty() || m.step() != o.waves_step) return;
      driver::Cluster* c = m.cluster();
      if (c && !c->local(o.waves_chip)) return;  // under mpirun: the rank that holds the chip
      (c ? c->chip(o.waves_chip) : m.device()).arm_waves(o.waves, o.waves_from, o.waves_to);
      armed = true;
    }
  } wave_hook(opt);
  const auto fail = [&](const std::string& why) {
    err << "tessera train: " << why << "\n";
    return 2;
  };
  if (!opt.waves.empty()) {
    if (opt.backend != "rtl")
      return fail("--waves: the " + opt.backend +
                  " backend has no signals to dump; use --backend rtl");
    if (opt.waves_chip < 0 || opt.waves_chip >= opt.chips)
      return fail("--waves-chip " + std::to_string(opt.waves_chip) + ": the ring has chips 0 to " +
                  std::to_string(opt.chips - 1));
    if (opt.waves_step < first_step || opt.waves_step >= total)
      return fail("--waves-step " + std::to_string(opt.waves_step) + ": this run trains steps " +
                  std::to_string(first_step) + " to " + std::to_string(total - 1));
    if (opt.waves_to <= opt.waves_from) return fail("--waves: --to must be after --from");
  }
  keras::FitOptions fo;
  fo.steps = total;
  fo.batch_size = opt.batch;
  fo.seed = opt.seed;
  fo.prefetch = 2;
  fo.initial_step = first_step;
  fo.start = start;
  fo.stop_after = opt.stop_after;
  if (distributed) fo.callbacks.push_back(&kill_hook);
  if (order) fo.callbacks.push_back(order.get());
  if (sampled_check) fo.callbacks.push_back(sampled_check.get());
  fo.callbacks.push_back(&run_log);
  if (!opt.waves.empty()) fo.callbacks.push_back(&wave_hook);
  try {
    model->fit(train_set, fo);
  } catch (const driver::DeviceFault& e) {
    err << "\ntessera train: chip fault: " << e.what() << "\n";
    if (wave_hook.armed) write_chip_layout(opt.waves, out, err);  // the fault is in the dump
    return 1;
  } catch (const driver::DeviceTimeout& e) {
    err << "\ntessera train: " << e.what() << "\n";
    if (wave_hook.armed) write_chip_layout(opt.waves, out, err);
    return 1;
  } catch (const SampledMismatch& e) {
    err << "\ntessera train: " << e.what() << "\n";
    return 1;
  }
  order.reset();
  if (wave_hook.armed && !write_chip_layout(opt.waves, out, err)) return 2;
  const double train_wall = run_log.wall_seconds();
  const uint64_t last_step = run_log.last_step();
  last_loss = run_log.last_loss();
  last_acc = run_log.last_accuracy();
  const std::vector<uint64_t>& step_cycles = run_log.step_cycles();
  const std::vector<driver::RunReport>& reports = run_log.reports();
  const std::vector<PhaseTiming>& phases = run_log.phases();
  const uint64_t profiled_step = run_log.profiled_step();
  const uint64_t sampled_steps = sampled_check ? sampled_check->steps_checked() : 0;
  const std::string ckpt_path = run_log.checkpoint_path();
  constexpr uint64_t kSampleEvery = kProfileSampleEvery;
  if (opt.stop_after && last_step < total) {
    out << "stopped after step " << last_step << " (checkpoint " << ckpt_path << ")\n";
    return 0;
  }

  // ---- evaluation on the test set ----
  const auto t_eval = Clock::now();
  keras::EvalResult ev;
  constexpr uint32_t kTestProbsImages = 1000;
  std::vector<float> test_probs;
  {
    std::unique_ptr<keras::Sequential> evaluator;
    keras::Sequential* m = model.get();
    if (eval_backend != backend) {
      evaluator = make_model(false);  // evaluation runs on one chip (one copy of the weights)
      // one chip, one replica's batch (the training step's: it fits the chip)
      compile(*evaluator, eval_backend, opt.batch / static_cast<uint32_t>(std::max(1, opt.chips)));
      compiler::DenseParams p;
      compiler::DenseOptState a;
      model->get_state(p, a);
      evaluator->set_state(p, a);
      m = evaluator.get();
    }
    ev = m->evaluate(test_set);
    // the softmax outputs of the first test images (weights/test_probs.f32: tessera evaluate
    // --probs gives the same from the export)
    data::Dataset head = test_set;
    head.count = std::min<uint32_t>(test_set.count, kTestProbsImages);
    head.images.resize(size_t{head.count} * head.rows * head.cols);
    head.labels.resize(head.count);
    test_probs = m->predict(head);
  }
  const double eval_wall = std::chrono::duration<double>(Clock::now() - t_eval).count();
  out << "test accuracy " << ev.accuracy << " loss " << ev.loss << " (" << ev.samples
      << " images)\n"
      << "evaluated on the " << opt.eval_backend << " backend in " << eval_wall << " s\n";

  // ---- the run folder ----
  bool cycles_constant = true;
  for (uint64_t c : step_cycles) cycles_constant = cycles_constant && c == step_cycles.front();
  const double mean_util = step_cycles.empty()
                               ? 0.0
                               : static_cast<double>(reports.front().perf[isa::PERF_MACS]) /
                                     (double(step_cycles.front()) * n * n);
  std::ostringstream report;
  {
    const compiler::StepStats& st = step_prog.stats();
    // the profiled rtl step per phase first (tessera report prints it)
    if (!phases.empty()) {
      const driver::RunReport& r = reports.front();
      const auto& P = step_prog;
      report << "step " << profiled_step << ": " << r.cycles << " cycles; roofline bound "
             << P.bound_cycles() << " cycles (" << g9(double(r.cycles) / double(P.bound_cycles()))
             << "x; each phase's unit bounds: the program table further down)\n"
             << phase_report(phases, n, opt.channels);
      report << "(per phase: decode-PC samples every " << kSampleEvery
             << " cycles; unit busy and MXU utilization as % of the phase's cycles;\n"
                "roofline = the largest of the phase's unit bounds: the MXU's shape bound\n"
                "(max(rows w, N w + 1) an MXU.MM, w UB words a row), the VPU's operations (one\n"
                "a cycle), the DMA's cycles at its peak (one run of up to a 32-byte word a\n"
                "cycle), the HBM bytes at the pins (the DMA's bursts and the phase's\n"
                "instructions) at "
             << compiler::kHbmBytesPerCycle
             << " B/cycle a pseudo-channel, the flits sent to a neighbour at "
             << compiler::ici_flit_cycles()
             << "\ncycles a flit, and the instructions executed (SEQ: the sequencer decodes\n"
                "one a cycle for every unit); binds = the unit that sets it;\n"
                "MXU bound/busy = the MXU's shape bound over its busy cycles; HBM bus = cycles\n"
                "the HBM data bus carried data, R/W turns = switches between reads and writes,\n"
                "REFs = refreshes, on the device pins; timeline: timeline.json (Chrome trace:\n"
                "ui.perfetto.dev or chrome://tracing); roofline.png)\n\n";
    } else {
      report << "no rtl step ran (--backend rtl or sampled profiles its first rtl step)\n\n";
    }
    report << "Tessera training step: " << st.instructions << " instructions (DMA " << st.dma
           << ", MXU " << st.mxu << ", VPU " << st.vpu << "; " << st.waits << " waits, "
           << st.signals << " signals), " << st.macs << " MACs\n";
    report << "unit bounds: MXU " << step_prog.mxu_bound_cycles()
           << " cycles (the shape bound), VPU " << step_prog.vpu_bound_cycles()
           << " (one op each), DMA " << step_prog.dma_bound_cycles() << " (" << st.dma_elements
           << " elements, a run of up to a 32-byte word a cycle), HBM "
           << step_prog.hbm_bound_cycles() << " (" << st.hbm_bytes << " DMA bytes and "
           << st.instructions * isa::kInstructionBytes << " of instructions), ICI "
           << step_prog.ici_bound_cycles() << " (" << st.ici_flits << " flits), SEQ "
           << step_prog.seq_bound_cycles() << " (instructions executed)\n\n";
    report << "program: " << st.instructions << " instructions (" << st.loops << " REPEAT loops; "
           << st.executed << " executed); roofline bound " << step_prog.bound_cycles()
           << " cycles (per phase the largest of the unit bounds)\n\n";
    report << "phase        instructions  DMA elements  MXU bound  VPU bound  DMA bound  HBM bound  "
              "ICI bound  SEQ bound   roofline  binds\n";
    for (const auto& p : st.phases) {
      const compiler::Roofline rf = compiler::roofline(p, step_prog.chip().channels);
      report << std::left << std::setw(13) << p.name << std::right << std::setw(12)
             << p.instructions << std::setw(14) << p.dma_elements;
      for (uint64_t v : {rf.mxu, rf.vpu, rf.dma, rf.hbm, rf.ici, rf.seq, rf.bound()})
        report << std::setw(11) << v;
      report << std::setw(7) << rf.unit() << "\n";
    }
    if (!reports.empty()) {
      const auto& r = reports.front();
      const double c = double(r.cycles);
      report << "\nrtl step: " << r.cycles << " cycles"
             << (cycles_constant ? " (identical on every measured step)" : " (VARIES)") << "\n";
      const char* unit[] = {"DMA", "MXU", "VPU"};
      for (int u = 0; u < 3; ++u)
        report << "  " << unit[u] << " busy " << r.perf[isa::PERF_DMA_BUSY + u] << " ("
               << std::fixed << std::setprecision(1) << 100.0 * r.perf[isa::PERF_DMA_BUSY + u] / c
               << "%), stalled " << r.perf[isa::PERF_DMA_STALL + u] << std::defaultfloat << "\n";
      report << "  MXU utilization (MACs / N^2 / cycles) " << std::fixed << std::setprecision(1)
             << 100.0 * mean_util << "%\n";
      report << "  cycles / roofline bound " << std::setprecision(3)
             << c / double(step_prog.bound_cycles()) << std::defaultfloat << std::setprecision(6)
             << "\n";
      report << "  HBM read " << r.perf[isa::PERF_HBM_RD] << " B, written "
             << r.perf[isa::PERF_HBM_WR] << " B\n";
    }
  }
  runlog::write_file_atomically(run_dir + "/cycle_report.txt", report.str());
  using runlog::JsonValue;
  JsonValue::Object phase_cycles;  // of the sampled rtl step (empty otherwise)
  for (const PhaseTiming& ph : phases)
    phase_cycles.emplace_back(ph.name,
                              JsonValue(static_cast<unsigned long long>(ph.end - ph.begin)));
  runlog::write_summary_json(
      run_dir + "/summary.json",
      {{"backend", JsonValue(opt.backend)},
       {"array", JsonValue(n)},
       {"chips", JsonValue(opt.chips)},
       {"channels", JsonValue(opt.channels)},
       {"arith", JsonValue(opt.arith)},
       {"model", JsonValue(model_desc.name.empty() ? opt.model : model_desc.name)},
       {"compiler", JsonValue("DenseStackStep")},
       {"optimizer", JsonValue(opt.optimizer)},
       {"lr", JsonValue(double{os.lr})},
       {"lr_schedule", JsonValue(compiler::schedule_name(os.schedule))},
       {"beta_1", JsonValue(double{os.beta1})},
       {"beta_2", JsonValue(double{os.beta2})},
       {"momentum", JsonValue(double{os.momentum})},
       {"label_smoothing", JsonValue(double{os.label_smoothing})},
       {"steps", JsonValue(static_cast<unsigned long long>(last_step))},
       {"first_step", JsonValue(static_cast<unsigned long long>(first_step))},
       {"batch", JsonValue(opt.batch)},
       {"seed", JsonValue(static_cast<unsigned long long>(opt.seed))},
       {"final_loss", JsonValue(last_loss)},
       {"final_accuracy", JsonValue(last_acc)},
       {"test_loss", JsonValue(ev.loss)},
       {"test_accuracy", JsonValue(ev.accuracy)},
       {"test_samples", JsonValue(static_cast<unsigned long long>(ev.samples))},
       {"eval_backend", JsonValue(opt.eval_backend)},
       {"test_probs_images",
        JsonValue(static_cast<unsigned long long>(test_probs.size() / model->spec().classes()))},
       {"step_cycles", JsonValue::array(step_cycles)},
       {"step_cycles_identical", JsonValue(cycles_constant)},
       {"sampled_steps", JsonValue(static_cast<unsigned long long>(sampled_steps))},
       {"mxu_utilization", JsonValue(mean_util)},
       {"mxu_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.mxu_bound_cycles()))},
       {"vpu_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.vpu_bound_cycles()))},
       {"dma_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.dma_bound_cycles()))},
       {"hbm_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.hbm_bound_cycles()))},
       {"ici_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.ici_bound_cycles()))},
       {"seq_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.seq_bound_cycles()))},
       {"roofline_bound_cycles",
        JsonValue(static_cast<unsigned long long>(step_prog.bound_cycles()))},
       {"phase_cycles", JsonValue::object(std::move(phase_cycles))},
       {"program_instructions",
        JsonValue(static_cast<unsigned long long>(step_prog.stats().instructions))},
       {"wall_seconds", JsonValue(train_wall)},
       {"eval_wall_seconds", JsonValue(eval_wall)},
       {"images_per_second_wall",
        JsonValue(double(last_step - first_step) * opt.batch / train_wall)}});
  try {
    runlog::plot_training_curves(csv.path(), run_dir + "/loss.png");
  } catch (const std::exception& e) {
    err << "tessera train: loss.png not written: " << e.what() << "\n";
  }
  // the weight export (tessera evaluate reads it)
  export_dense_weights(run_dir + "/weights", model_desc.name, model->spec(), model->get_weights());
  runlog::write_file_atomically(
      run_dir + "/weights/test_probs.f32",
      std::string(reinterpret_cast<const char*>(test_probs.data()), test_probs.size() * 4));
  out << report.str() << "wrote " << run_dir << "/{summary.json,metrics.csv,"
      << events.path().substr(events.path().rfind('/') + 1)
      << ",loss.png,cycle_report.txt,checkpoint/ckpt.tsr,weights/}\n";
  return 0;
}

int report(const std::string& run_dir, std::ostream& out, std::ostream& err) {
  std::ifstream summary(run_dir + "/summary.json"), cycles(run_dir + "/cycle_report.txt");
  if (!summary || !cycles) {
    err << "tessera report: " << run_dir
        << " is not a run folder (no summary.json / cycle_report.txt; tessera train writes them)\n";
    return 2;
  }
  out << "== " << run_dir << "/summary.json\n"
      << summary.rdbuf() << "\n== " << run_dir << "/cycle_report.txt\n"
      << cycles.rdbuf();
  for (const char* f : {"timeline.json", "roofline.png", "loss.png"}) {
    std::ifstream probe(run_dir + "/" + f);
    out << (probe ? "  " : "  (missing) ") << run_dir << "/" << f << "\n";
  }
  return 0;
}

}  // namespace tessera::tools
