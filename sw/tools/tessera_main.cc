// tessera: the project's command line. Subcommands:
//   fpu-check --op {add|bf16mul|mul|div|sqrt|f2bf|bf2f} [--arith rtl|host] FILE
//                                                  replay a TestFloat-style vector file
//                                                  through the arithmetic RTL
//   hbm-replay TRACE [--channels N] [--request-bytes B] [--json] [--cmd-trace FILE]
//                                                  replay a memory-request trace through the
//                                                  HBM2 memory system; bandwidth and latency
//   asm IN.s -o OUT.bin [--n N]                     assemble a program (docs/isa.md syntax)
//   disasm IN.bin [--n N]                           print a program image as canonical text
//   run PROGRAM [--backend rtl|functional] [--load ADDR=FILE ...] [--dump ADDR:BYTES=FILE ...]
//                                                  run a program to HALT; print the counters
//   train [--backend rtl|functional|sampled] [--steps S | --epochs E] [--batch B] [--array N]
//         [--chips P] [--threads T]
//         [--seed S] [--data DIR] [--out DIR] [--resume DIR] [--sample-every K]
//                                                  train the example CNN on the chip
//   report RUN_DIR                                  a run's summary and cycle report
//   evaluate WEIGHTS_DIR --model FILE [--backend rtl|functional] [--eval-samples N] [--probs F]
//                                                  a general-compiler model's exported weights
//                                                  on the test set
//   compile [--array N] [--batch B] [--dump] [--evaluate] [--asm FILE] [--label-smoothing E]
//                                                  the compiled step, stage by stage
//   tfrecord convert IDX_DIR OUT_PREFIX [--split train|test] [--shards N]
//                                                  an IDX dataset as TFRecord files of Examples
//   tfrecord check FILE...                          every record's CRCs and image Example
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "harness/waves/wave_layout.h"
#include "sw/tools/asm_tool.h"
#include "sw/tools/compile_tool.h"
#include "sw/tools/evaluate_tool.h"
#include "sw/tools/fpu_check.h"
#include "sw/tools/hbm_replay.h"
#include "sw/tools/run_tool.h"
#include "sw/tools/tfrecord_tool.h"
#include "sw/tools/train_tool.h"
#include "tessera/data.h"
#include "tessera/mpi_ring.h"

int main(int argc, char** argv) {
  CLI::App app{"tessera: a TPU-style training accelerator, simulated cycle by cycle"};
  app.require_subcommand(1);

  std::string op_name, vector_file;
  auto* fpu = app.add_subcommand("fpu-check", "replay an IEEE vector file through the RTL");
  fpu->add_option("--op", op_name, "operation: add, bf16mul, mul, div, sqrt, f2bf, bf2f")
      ->required()
      ->check(CLI::IsMember({"add", "bf16mul", "mul", "div", "sqrt", "f2bf", "bf2f"}));
  fpu->add_option("file", vector_file, "vector file: operand(s) expected [flags], hex")->required();
  std::string fpu_arith = "rtl";
  fpu->add_option("--arith", fpu_arith,
                  "which build of the arithmetic: rtl (the synthesizable RTL) or host (the "
                  "host-arithmetic simulation flavour)")
      ->capture_default_str()
      ->check(CLI::IsMember({"rtl", "host"}));

  std::string trace_file;
  tessera::tools::HbmReplayOptions replay;
  auto* hbm = app.add_subcommand(
      "hbm-replay",
      "replay a memory-request trace (address READ|WRITE cycle) through the HBM2 "
      "memory system: bandwidth, read latency, row hits, refresh");
  hbm->add_option("trace", trace_file,
                  "trace: one request a line, <hex address> <READ|WRITE> "
                  "<cycle>")
      ->required();
  hbm->add_option("--channels", replay.channels, "pseudo-channels (and ports): 1, 2, 4, 8 or 16")
      ->capture_default_str();
  hbm->add_option("--request-bytes", replay.request_bytes,
                  "bytes per request: 32 .. 512, a multiple of 32")
      ->capture_default_str();
  hbm->add_flag("--json", replay.json, "print one JSON object instead of the report");
  hbm->add_option("--cmd-trace", replay.cmd_trace,
                  "write every device command to FILE: cycle cmd pc bg bank row col");

  std::string asm_in, asm_out, disasm_in;
  tessera::assembler::AsmOptions asm_opts;
  auto* as = app.add_subcommand("asm", "assemble a program into its binary image (docs/isa.md)");
  as->add_option("input", asm_in, "assembly text")->required();
  as->add_option("-o,--output", asm_out, "binary program image to write")->required();
  as->add_option("--n", asm_opts.n, "array size N (bcast lanes must be below it)")
      ->capture_default_str();
  auto* dis = app.add_subcommand("disasm", "print a binary program image as canonical assembly");
  dis->add_option("input", disasm_in, "binary program image")->required();
  dis->add_option("--n", asm_opts.n, "array size N")->capture_default_str();

  tessera::tools::RunOptions run_opt;
  auto* run = app.add_subcommand("run", "run a program (.s assembled, else binary) to HALT");
  run->add_option("program", run_opt.program, "program: assembly (.s, .asm) or binary image")
      ->required();
  run->add_option("--backend", run_opt.backend, "rtl (cycle-accurate) or functional")
      ->check(CLI::IsMember({"rtl", "functional"}))
      ->capture_default_str();
  run->add_option("--array", run_opt.array,
                  "array size N: the chip the rtl backend is built for at N (4 or 16; others "
                  "functional only)")
      ->capture_default_str();
  run->add_option("--load", run_opt.loads, "ADDR=FILE: copy FILE into HBM at ADDR first");
  run->add_option("--dump", run_opt.dumps, "ADDR:BYTES=FILE: write HBM to FILE after HALT");
  run->add_option("--prog-addr", run_opt.prog_addr, "HBM address of the program")
      ->capture_default_str();
  run->add_option("--timeout", run_opt.timeout, "watchdog: cycles (rtl) or instructions")
      ->capture_default_str();
  run->add_option("--waves", run_opt.waves,
                  "rtl: dump the chip's signals into this FST file, the chip layout beside it "
                  "(FILE.gtkw; docs/testing.md, Waveforms)");
  run->add_option("--from", run_opt.waves_from,
                  "--waves: the first cycle dumped (from the doorbell)");
  run->add_option("--to", run_opt.waves_to, "--waves: the cycle the dump ends at");

  tessera::tools::TrainOptions tr;
  auto* trn = app.add_subcommand(
      "train", "train the example CNN on Fashion-MNIST on the simulated chip (docs/training.md)");
  trn->add_option("--backend", tr.backend, "rtl (cycle-accurate), functional, or sampled")
      ->check(CLI::IsMember({"rtl", "functional", "sampled"}))
      ->capture_default_str();
  trn->add_option("--steps", tr.steps, "training steps (overrides --epochs)");
  trn->add_option("--epochs", tr.epochs, "epochs over the training set")->capture_default_str();
  trn->add_option("--batch", tr.batch, "batch size")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  trn->add_option("--array", tr.array, "MXU array size N (rtl: 4 or 16)")->capture_default_str();
  trn->add_option("--channels", tr.channels,
                  "HBM pseudo-channels per chip (rtl: 1, or 2 at --array 16)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  trn->add_option("--arith", tr.arith,
                  "rtl backend: which build of the chip — rtl (the synthesizable arithmetic) or "
                  "host (the host-arithmetic build: the same cycles and results, faster; N = 16, "
                  "one channel)")
      ->check(CLI::IsMember({"rtl", "host"}))
      ->capture_default_str();
  trn->add_option("--chips", tr.chips,
                  "data parallelism: replicas on a ring of chips (TPUStrategy); --batch is the "
                  "global batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  trn->add_option("--threads", tr.threads,
                  "host threads for the rtl ring (0: one per chip, at "
                  "most the cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  trn->add_option("--seed", tr.seed, "weight initialisation and data order")->capture_default_str();
  trn->add_option("--model", tr.model,
                  "a model description file (JSON, docs/training.md; default: the example CNN, "
                  "examples/models/example_cnn.json)");
  trn->add_option("--data", tr.data, "Fashion-MNIST/MNIST IDX directory (default: Debian's)");
  trn->add_option("--out", tr.out, "run folder (default runs/<timestamp>)");
  trn->add_option("--resume", tr.resume, "continue from a run folder's checkpoint");
  trn->add_option("--sample-every", tr.sample_every, "sampled: every K-th step also on rtl")
      ->capture_default_str();
  trn->add_option("--checkpoint-every", tr.checkpoint_every,
                  "also checkpoint every K steps (always: each epoch end and the end)");
  trn->add_option("--eval-samples", tr.eval_samples, "evaluate on the first N test images");
  trn->add_option("--eval-backend", tr.eval_backend, "backend of the test-set evaluation")
      ->check(CLI::IsMember({"rtl", "functional"}))
      ->capture_default_str();
  trn->add_option("--stop-after", tr.stop_after, "stop after this step (checkpointed)");
  trn->add_flag("!--no-progress", tr.progress, "no progress bar");
  trn->add_option("--optimizer", tr.optimizer, "adam or sgd (any model, any number of chips)")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  trn->add_option("--lr", tr.lr, "learning rate (default: Adam 1e-3, SGD 0.01)");
  trn->add_option("--momentum", tr.momentum, "SGD momentum")->capture_default_str();
  trn->add_option("--lr-schedule", tr.lr_schedule,
                  "the learning rate over the run's steps (cosine: Keras "
                  "CosineDecay, linear: PolynomialDecay to 0)")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))
      ->capture_default_str();
  trn->add_option("--beta1", tr.beta1, "Adam's beta_1")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  trn->add_option("--beta2", tr.beta2, "Adam's beta_2")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  trn->add_option("--label-smoothing", tr.label_smoothing,
                  "the loss's label smoothing (targets (1 - eps) one-hot + eps / "
                  "classes, Keras's CategoricalCrossentropy; 0: sparse cross-entropy)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  trn->add_option("--waves", tr.waves,
                  "rtl: dump the chip's signals during step --waves-step into this FST file, the "
                  "chip layout beside it (FILE.gtkw; docs/testing.md, Waveforms)");
  trn->add_option("--waves-step", tr.waves_step, "--waves: the step dumped")->capture_default_str();
  trn->add_option("--waves-chip", tr.waves_chip, "--waves: the chip of the ring dumped")
      ->capture_default_str();
  trn->add_option("--from", tr.waves_from, "--waves: the step's first cycle dumped");
  trn->add_option("--to", tr.waves_to, "--waves: the cycle of the step the dump ends at");
  trn->add_option(
      "--dump-init", tr.dump_init,
      "write the initial weights and the sample order here (for the PyTorch reference)");

  std::string wl_fst, wl_layout, wl_out;
  bool wl_check = false;
  auto* wl = app.add_subcommand(
      "waves-layout",
      "write a GTKWave layout of waves/ for a dump: bus widths, translate filters, zoom, marker");
  wl->add_option("fst", wl_fst, "the FST dump")->required();
  wl->add_option("--layout", wl_layout, "the layout (default: waves/chip.gtkw)");
  wl->add_option("--out", wl_out, "where to write it (default: beside the dump, FILE.gtkw)");
  wl->add_flag("--check", wl_check, "exit 1 if the layout names a signal the dump lacks");
  bool wl_list = false;
  wl->add_flag("--list", wl_list, "print the dump's signals (name, range) and its extent instead");

  std::string report_dir;
  auto* rep = app.add_subcommand("report", "print a run folder's summary and cycle report");
  rep->add_option("run_dir", report_dir, "a folder tessera train wrote")->required();

  // data-order: the training sample ids the pipeline gives for a seed (tessera train's order),
  // for the PyTorch reference (tests/reference/crosscheck_accuracy.sh).
  uint64_t order_seed = 0, order_steps = 468;
  uint32_t order_batch = 128;
  std::string order_out, order_data;
  auto* ord = app.add_subcommand("data-order", "write the training sample order of a seed");
  ord->add_option("--seed", order_seed, "the pipeline's seed")->capture_default_str();
  ord->add_option("--batch", order_batch, "batch size")->capture_default_str();
  ord->add_option("--steps", order_steps, "steps (batches) to write")->capture_default_str();
  ord->add_option("--data", order_data, "IDX directory (default: Debian's Fashion-MNIST)");
  ord->add_option("-o,--out", order_out, "output: little-endian uint32 sample ids")->required();

  tessera::tools::EvaluateOptions ev;
  auto* evl = app.add_subcommand(
      "evaluate", "a trained model's weights on the test set (a general-compiler model's export)");
  evl->add_option("weights", ev.weights, "the weights export folder (a run's weights/)")
      ->required();
  evl->add_option("--model", ev.model, "the model description file it was trained from")
      ->required();
  evl->add_option("--backend", ev.backend, "rtl or functional (the same bits)")
      ->check(CLI::IsMember({"rtl", "functional"}))
      ->capture_default_str();
  evl->add_option("--arith", ev.arith, "rtl backend: rtl or host (as tessera train)")
      ->check(CLI::IsMember({"rtl", "host"}))
      ->capture_default_str();
  evl->add_option("--array", ev.array, "MXU array size N")->capture_default_str();
  evl->add_option("--channels", ev.channels, "HBM pseudo-channels")->capture_default_str();
  evl->add_option("--batch", ev.batch, "images a run of the evaluation program")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  evl->add_option("--eval-samples", ev.eval_samples, "the first N test images (default: all)");
  evl->add_option("--data", ev.data, "IDX directory (default: Debian's Fashion-MNIST)");
  evl->add_option("--probs", ev.probs,
                  "write every evaluated image's softmax here ([images][classes] fp32)");

  tessera::tools::CompileOptions co;
  auto* cmp = app.add_subcommand("compile", "compile a model's step (docs/compiler.md)");
  cmp->add_option("--model", co.model, "a model description file (default: the example CNN)");
  cmp->add_option("--array", co.array, "MXU array size N")->capture_default_str();
  cmp->add_option("--batch", co.batch, "batch size")->capture_default_str();
  cmp->add_flag("--dump", co.dump, "print the representation after each stage");
  cmp->add_flag("--evaluate", co.evaluate, "the evaluation (forward-only) program");
  cmp->add_option("--asm", co.asm_out, "write the program as assembly to FILE");
  cmp->add_option("--label-smoothing", co.label_smoothing,
                  "the loss's label smoothing (as tessera train's; the training program)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();

  tessera::tools::TFRecordConvertOptions tfc;
  std::vector<std::string> tfrecord_files;
  auto* tfr = app.add_subcommand("tfrecord", "TFRecord files of image Examples (docs/data.md)");
  tfr->require_subcommand(1);
  auto* tfr_convert =
      tfr->add_subcommand("convert", "write an IDX dataset's split as TFRecord files");
  tfr_convert
      ->add_option("idx_dir", tfc.idx_dir,
                   "IDX directory (Debian's Fashion-MNIST: "
                   "/usr/share/datasets/fashion-mnist)")
      ->required();
  tfr_convert
      ->add_option("out_prefix", tfc.out_prefix,
                   "the file written, or the shards' prefix (PREFIX-00000-of-0000N)")
      ->required();
  tfr_convert->add_option("--split", tfc.split, "train or test")
      ->check(CLI::IsMember({"train", "test"}))
      ->capture_default_str();
  tfr_convert->add_option("--shards", tfc.shards, "files, each a contiguous run of samples")
      ->check(CLI::Range(1, 99999))
      ->capture_default_str();
  auto* tfr_check = tfr->add_subcommand(
      "check", "read TFRecord files of image Examples: every CRC, count, shape, labels");
  tfr_check->add_option("files", tfrecord_files, "TFRecord files")->required();

  // A bad command line is bad input like any other: exit status 2 (CLI11's own codes, 105 for
  // a value out of range, 109 for an unknown flag, ..., would say nothing to a script).
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0
  }

  if (ord->parsed()) {
    try {
      namespace data = tessera::data;
      const data::Dataset ds = data::load_mnist(
          order_data.empty() ? data::default_data_dir() : order_data, data::Split::kTrain);
      data::PipelineConfig pc;
      pc.batch = order_batch;
      pc.seed = order_seed;
      pc.shuffle_buffer = ds.count;  // as tessera train
      pc.prefetch = 0;
      data::Pipeline pipe(ds, pc);
      std::FILE* f = std::fopen(order_out.c_str(), "wb");
      if (!f) throw std::runtime_error(order_out + ": cannot write");
      for (uint64_t s = 0; s < order_steps; ++s) {
        const data::Batch b = pipe.next();
        std::fwrite(b.sample_ids.data(), 4, b.sample_ids.size(), f);
      }
      if (std::fclose(f) != 0) throw std::runtime_error(order_out + ": write failed");
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "tessera data-order: " << e.what() << "\n";
      return 2;
    }
  }
  if (tfr_convert->parsed()) return tessera::tools::tfrecord_convert(tfc, std::cout, std::cerr);
  if (tfr_check->parsed()) {
    return tessera::tools::tfrecord_check(tfrecord_files, std::cout, std::cerr);
  }
  if (rep->parsed()) return tessera::tools::report(report_dir, std::cout, std::cerr);
  if (cmp->parsed()) return tessera::tools::compile_step(co, std::cout, std::cerr);
  if (evl->parsed()) {
    try {
      return tessera::tools::evaluate_dense(ev, std::cout, std::cerr);
    } catch (const std::exception& e) {  // what the checks before the run did not foresee
      std::cerr << "tessera evaluate: " << e.what() << "\n";
      return 2;
    }
  }

  if (trn->parsed()) {
    // Under mpirun (one chip per rank, docs/multichip.md): every rank runs this; a failure on
    // one rank that the others cannot see ends the whole job instead of leaving them waiting.
    tessera::mpi::init();
    // Under mpirun the ranks share one stderr: each rank's lines go out whole (line-buffered),
    // not piece by piece as std::cerr writes them, so two ranks' messages cannot interleave.
    if (tessera::mpi::launched()) std::setvbuf(stderr, nullptr, _IOLBF, 1 << 16);
    for (const CLI::Option* o : trn->get_options())  // what a resume does not take from the run
      if (o->count() > 0 && !o->get_lnames().empty()) tr.given.insert(o->get_lnames().front());
    int rc = 2;
    try {
      rc = tessera::tools::train(tr, std::cout, std::cerr);
    } catch (const std::exception& e) {  // I/O on the run folder, mostly
      if (tessera::mpi::launched())
        tessera::mpi::abort(2, std::string("tessera train: ") + e.what());
      std::cerr << "tessera train: " << e.what() << "\n";
      rc = 2;
    }
    // A rank that stops with an error while others may still be in a collective (a ring run,
    // a gather) must not wait in MPI_Finalize for them: it ends the job.
    if (tessera::mpi::launched() && rc != 0)
      tessera::mpi::abort(rc, "tessera train stopped with exit status " + std::to_string(rc) +
                                  ": ending every rank");
    tessera::mpi::finalize();
    return rc;
  }

  if (run->parsed()) return tessera::tools::run_program(run_opt, std::cout, std::cerr);
  if (wl->parsed()) {
    try {
      const std::string fst = std::filesystem::absolute(wl_fst).string();
      if (wl_list) {
        const auto info = tessera::waves::read_fst(fst);
        for (const auto& [name, range] : info.signals) std::cout << name << range << "\n";
        std::cout << "# time " << info.start << " to " << info.end << " ps\n";
        return 0;
      }
      const std::string out =
          wl_out.empty() ? std::filesystem::path(wl_fst).replace_extension(".gtkw").string()
                         : wl_out;
      const auto r = tessera::waves::write_layout(
          fst, wl_layout.empty() ? tessera::waves::chip_layout_path() : wl_layout, out,
          tessera::waves::filter_dir());
      for (const std::string& m : r.missing)
        std::cerr << "waves-layout: " << (wl_layout.empty() ? "waves/chip.gtkw" : wl_layout)
                  << " names " << m << ", which " << wl_fst << " does not hold\n";
      std::cout << out << "\n";
      return wl_check && !r.missing.empty() ? 1 : 0;
    } catch (const std::exception& e) {
      std::cerr << "waves-layout: " << e.what() << "\n";
      return 2;
    }
  }

  if (as->parsed()) return tessera::tools::run_asm(asm_in, asm_out, asm_opts, std::cerr);
  if (dis->parsed()) return tessera::tools::run_disasm(disasm_in, asm_opts, std::cout, std::cerr);

  if (fpu->parsed()) {
    const auto op = tessera::tools::parse_fpu_op(op_name);
    return tessera::tools::run_fpu_check(*op, vector_file, std::cout, std::cerr,
                                         fpu_arith == "host");
  }
  if (hbm->parsed()) {
    return tessera::tools::run_hbm_replay(trace_file, replay, std::cout, std::cerr);
  }
  return 2;
}
