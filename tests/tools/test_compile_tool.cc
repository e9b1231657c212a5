// `tessera compile` (sw/tools/compile_tool.cc, docs/compiler.md): --dump prints every pass of
// the graph compiler in order, then an HBM plan whose regions lie in order inside the total;
// the statistics line counts the program the compiler builds in-process; --asm writes assembly
// that the assembler turns back into exactly that program; --model with the example's
// description file is the default; --evaluate compiles the smaller evaluation step; a file
// that cannot be written exits 2. Runs the real binary (TESSERA_BIN_DIR/tessera).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "sw/compiler/graph.h"
#include "tessera/asm.h"
#include "tessera/keras.h"
#include "tessera/model_file.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class CompileCli : public ::testing::Test {
 protected:
  CompileCli()
      : dir_(fs::temp_directory_path() / ("tessera_compile_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~CompileCli() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string slurp(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // Runs tessera with `args`; stdout into `out`, stderr into `err`; returns the exit status.
  int tessera(const std::string& args, std::string& out, std::string& err) {
    const std::string bin = std::string(TESSERA_BIN_DIR) + "/tessera";
    const int st = std::system(
        (bin + " " + args + " > " + path("out.txt") + " 2> " + path("err.txt")).c_str());
    out = slurp("out.txt");
    err = slurp("err.txt");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  fs::path dir_;
};

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// The example CNN as the compiler's spec, and its step for an N = 4 chip and batch 8,
// compiled in-process.
compiler::DenseStackSpec example_spec() { return keras::dense_stack_spec(keras::example_cnn().layers); }
compiler::DenseStackStep example_step(compiler::StepKind kind) {
  const driver::DeviceConfig c = driver::chip_for_array(4);
  return compiler::DenseStackStep(example_spec(), compiler::OptimizerSpec{},
                                  tessera::ChipShape{c.n, c.ub_bytes, c.acc_rows}, 8, 0, kind);
}

TEST_F(CompileCli, DumpShowsEveryPassThePlanAndTheProgram) {
  std::string out, err;
  ASSERT_EQ(tessera("compile --array 4 --batch 8 --dump --asm " + path("step.s"), out, err), 0)
      << err;
  EXPECT_EQ(err, "");

  // The stage headers, in the order the compiler runs its passes.
  std::vector<std::string> headers;
  for (const auto& l : lines_of(out))
    if (l.rfind("== ", 0) == 0) headers.push_back(l);
  ASSERT_GE(headers.size(), 8u) << out;
  EXPECT_EQ(headers[0], "== 1 build");
  EXPECT_EQ(headers[1], "== 2 autodiff");
  EXPECT_EQ(headers[2], "== 3 numerics (bf16 casts)");
  EXPECT_EQ(headers[3], "== 4 fuse");
  EXPECT_EQ(headers[4], "== 5 lower");
  EXPECT_EQ(headers[5].rfind("== 6 tiling", 0), 0u) << headers[5];
  EXPECT_EQ(headers[6], "== 7 memory (HBM plan, base 0)");
  EXPECT_EQ(headers[7].rfind("== program: ", 0), 0u) << headers[7];

  // Each pass's text is the graph the in-process compiler dumps after that pass.
  compiler::PassDumps dumps;
  compiler::compile_graph(example_spec(), compiler::OptimizerSpec::Kind::kAdam,
                          driver::chip_for_array(4), 8, &dumps);
  ASSERT_EQ(dumps.size(), 5u);
  for (size_t i = 0; i < dumps.size(); ++i) {
    const std::string block =
        "== " + std::to_string(i + 1) + " " + dumps[i].first + "\n" + dumps[i].second + "\n";
    EXPECT_NE(out.find(block), std::string::npos) << "pass " << dumps[i].first;
  }
  // Autodiff adds the backward graph: its dump is longer than the forward one.
  EXPECT_GT(dumps[1].second.size(), dumps[0].second.size());

  // The HBM plan: the persistent regions in increasing order, the transients inside the total,
  // which matches the layout.
  const compiler::DenseStackStep step = example_step(compiler::StepKind::kTrain);
  const std::regex region(R"(^  0x([0-9a-f]{8})  (.+)$)"), total(R"(^  total (\d+) bytes$)");
  std::vector<uint64_t> addrs;
  uint64_t total_bytes = 0;
  for (const auto& l : lines_of(out)) {
    std::smatch m;
    if (std::regex_match(l, m, region)) addrs.push_back(std::stoull(m[1], nullptr, 16));
    if (std::regex_match(l, m, total)) total_bytes = std::stoull(m[1]);
  }
  ASSERT_EQ(addrs.size(), 9u) << out;  // images, labels, 2 layers, powers, consts, ones, ...
  EXPECT_EQ(addrs.front(), 0u);
  for (size_t i = 1; i < addrs.size(); ++i) EXPECT_LE(addrs[i - 1], addrs[i]) << "region " << i;
  EXPECT_EQ(total_bytes, step.layout().bytes);
  EXPECT_LT(addrs.back(), total_bytes);

  // The statistics line counts the program the compiler builds.
  const std::string stats = "== program: " + std::to_string(step.program().size()) +
                            " instructions (" + std::to_string(step.program().size() * 16) +
                            " bytes";
  EXPECT_NE(out.find(stats), std::string::npos) << out;
  EXPECT_NE(out.find("  bound: MXU " + std::to_string(step.mxu_bound_cycles()) + " cycles"),
            std::string::npos);

  // --asm: the assembler turns the file back into the very program.
  const assembler::AsmResult a = assembler::assemble(slurp("step.s"), assembler::AsmOptions{4});
  ASSERT_TRUE(a.ok()) << assembler::format_error("step.s", a.errors.front());
  ASSERT_EQ(a.instructions.size(), step.program().size());
  EXPECT_EQ(a.bytes(), step.program_bytes());
  EXPECT_NE(out.find("wrote " + path("step.s")), std::string::npos);
}

TEST_F(CompileCli, ExampleModelFileIsTheDefaultAndEvaluateIsSmaller) {
  std::string def, model, eval, err;
  ASSERT_EQ(tessera("compile --array 4 --batch 8 --dump", def, err), 0) << err;
  ASSERT_EQ(tessera("compile --array 4 --batch 8 --dump --model examples/models/example_cnn.json",
                    model, err),
            0)
      << err;
  EXPECT_EQ(model, def);

  ASSERT_EQ(tessera("compile --array 4 --batch 8 --evaluate --asm " + path("eval.s"), eval, err), 0)
      << err;
  const compiler::DenseStackStep ev = example_step(compiler::StepKind::kEvaluate);
  const compiler::DenseStackStep tr = example_step(compiler::StepKind::kTrain);
  EXPECT_LT(ev.program().size(), tr.program().size());
  EXPECT_NE(eval.find("== program: " + std::to_string(ev.program().size()) + " instructions"),
            std::string::npos)
      << eval;
  const assembler::AsmResult a = assembler::assemble(slurp("eval.s"), assembler::AsmOptions{4});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.bytes(), ev.program_bytes());
}

// A Dense stack (examples/models/mlp.json): --dump shows the
// layers, one lowering line per matmul of every phase (fwd1, fwd2, bwd2 with the input, weight
// and bias gradients, bwd1 without an input gradient), the HBM plan with the planner's
// transients sharing bytes (fewer planned than the buffers' sum), and the program's size as the
// in-process DenseStackStep has it; --asm reassembles to that program byte for byte.
TEST_F(CompileCli, DenseStackDumpsItsLoweringAndPlan) {
  std::string out, err;
  ASSERT_EQ(tessera("compile --array 4 --batch 8 --dump --model examples/models/mlp.json --asm " +
                        path("mlp.s"),
                    out, err),
            0)
      << err;
  compiler::DenseStackSpec spec;
  spec.input_shape = {28, 28, 1};
  spec.inputs = 784;
  spec.layers = {{256, true}, {10, false}};
  // every graph pass's text is the graph the in-process compiler dumps after that pass
  compiler::PassDumps dumps;
  compiler::compile_graph(spec, compiler::OptimizerSpec::Kind::kAdam, driver::chip_for_array(4), 8,
                          &dumps);
  ASSERT_EQ(dumps.size(), 5u);
  for (size_t i = 0; i < dumps.size(); ++i) {
    const std::string block =
        "== " + std::to_string(i + 1) + " " + dumps[i].first + "\n" + dumps[i].second + "\n";
    EXPECT_NE(out.find(block), std::string::npos) << "pass " << dumps[i].first;
  }
  const driver::DeviceConfig c = driver::chip_for_array(4);
  const compiler::DenseStackStep step(spec, {}, tessera::ChipShape{c.n, c.ub_bytes, c.acc_rows}, 8,
                                      0);
  for (const std::string& want : std::vector<std::string>{
           "== 1 build", "dense1.y = fused.matmul_bias_relu(", "== 5 lower",
           "loss, acc, dlogits = fused.matmul_bias_softmax_xent(", "== 6 tiling",
           "ddense1.a = fused.matmul_relu_grad(", "fwd1  Dense forward: [8 x 784] x [784 x 256]",
           "fwd2  softmax layer: [8 x 256]", "bwd2  Dense input gradient",
           "bwd2  Dense weight gradient: [10 x 8] x [8 x 256]", "bwd2  Dense bias gradient",
           "bwd1  Dense weight gradient: [256 x 8] x [8 x 784]", "bwd1  Dense bias gradient",
           "== 7 memory", "x1 ", "dz1 ", "dzT2 ",
           "== program: " + std::to_string(step.program().size()) + " instructions"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  EXPECT_EQ(out.find("bwd1  Dense input gradient"), std::string::npos);
  EXPECT_EQ(step.lowering_plan().size(), 7u);
  EXPECT_LT(step.layout().transient_bytes, step.layout().transient_unshared);
  const assembler::AsmResult a = assembler::assemble(slurp("mlp.s"), assembler::AsmOptions{4});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.bytes(), step.program_bytes());

  // with label smoothing: the program tessera train runs with --label-smoothing 0.1
  ASSERT_EQ(tessera("compile --array 4 --batch 8 --model examples/models/mlp.json "
                    "--label-smoothing 0.1 --asm " +
                        path("mlp_ls.s"),
                    out, err),
            0)
      << err;
  compiler::OptimizerSpec smooth;
  smooth.label_smoothing = 0.1f;
  const compiler::DenseStackStep ls_step(spec, smooth,
                                         tessera::ChipShape{c.n, c.ub_bytes, c.acc_rows}, 8, 0);
  const assembler::AsmResult als = assembler::assemble(slurp("mlp_ls.s"), assembler::AsmOptions{4});
  ASSERT_TRUE(als.ok());
  EXPECT_EQ(als.bytes(), ls_step.program_bytes());
  EXPECT_GT(ls_step.program().size(), step.program().size());
  // and the example CNN with it (any model takes every optimizer option)
  EXPECT_EQ(tessera("compile --array 4 --batch 8 --label-smoothing 0.1", out, err), 0) << err;
}

// The two-conv example model: its feature layers, each lowered matmul, the numbered phases and
// the planner's conv buffers; the dumped program is the one DenseStackStep builds from the spec
// keras maps the file to.
TEST_F(CompileCli, TwoConvModelDumpsItsFeatureLayers) {
  std::string out, err;
  ASSERT_EQ(tessera("compile --array 4 --batch 4 --dump --model examples/models/two_conv_cnn.json "
                    "--asm " +
                        path("two.s"),
                    out, err),
            0)
      << err;
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::DenseStackSpec spec;
  spec.input_shape = {28, 28, 1};
  spec.features = {{Kind::kConv, 32, 3, 1, false, true},
                   {Kind::kMaxPool, 0, 0, 0, false, false, 2},
                   {Kind::kConv, 64, 3, 1, false, true},
                   {Kind::kMaxPool, 0, 0, 0, false, false, 2}};
  spec.inputs = 1600;
  spec.layers = {{128, true, 0.5f, 0}, {10, false}};
  const driver::DeviceConfig c = driver::chip_for_array(4);
  const compiler::DenseStackStep step(spec, {}, tessera::ChipShape{c.n, c.ub_bytes, c.acc_rows}, 4,
                                      0);
  for (const std::string& want : std::vector<std::string>{
           "%0 x = input() : [4,28,28,1] f32", "conv1.y = fused.conv2d_bias_relu(",
           "[4,26,26,32] f32  {epilogue: + b, relu", "maxpool2.p = maxpool(", "flat = flatten(%",
           "[4,1600]", "dense1.drop = fused.matmul_bias_relu_dropout(", "rate 0.5",
           "conv1.W', conv1.b' = fused.conv2d_filter_bias_grad_adam(",
           "dmaxpool2.p = conv2d_input_grad(", "fwd_conv1  Conv2D forward: [2704 x 12]",
           "bwd_conv3  Conv2D input gradient: [676 x 576]",
           "bwd_conv1  Conv2D weight gradient: [10 x 2704] x [2704 x 32]",
           "bwd_maxpool2  maxpool2: pooling gradient", "conv3.grad_map", "conv3.gradT",
           "read from the input map", "phases: 0 setup 1 fwd_conv1 2 fwd_maxpool2",
           "== program: " + std::to_string(step.program().size()) + " instructions"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  // the first convolution has no input gradient (its input is the images)
  EXPECT_EQ(out.find("bwd_conv1  Conv2D input gradient"), std::string::npos);
  // one input channel: [dW; db] = [patches ones]^T dz, with no dz^T and no separate bias pass
  EXPECT_EQ(out.find("conv1.gradT"), std::string::npos);
  EXPECT_EQ(out.find("bwd_conv1  Conv2D bias gradient"), std::string::npos);
  const assembler::AsmResult a = assembler::assemble(slurp("two.s"), assembler::AsmOptions{4});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.bytes(), step.program_bytes());
}

TEST_F(CompileCli, UnwritableAsmFileExits2) {
  std::string out, err;
  const std::string bad = path("no/such/dir/step.s");
  EXPECT_EQ(tessera("compile --array 4 --batch 8 --asm " + bad, out, err), 2);
  EXPECT_EQ(err, "tessera compile: cannot write " + bad + "\n");
  EXPECT_FALSE(fs::exists(bad));
}

}  // namespace
}  // namespace tessera
