// The graph IR's passes for any supported model (sw/compiler/graph.h): random Dense stacks and
// convolutional networks are built, differentiated, cast, fused by pattern and lowered; the
// lowered graph must describe exactly the layer stack it was built from (the general compiler
// takes its stack from it) and assign exactly the phases the compiled program has, in order.
// Random cases print their seed; TESSERA_GRAPH_SEED replays one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "sw/compiler/graph.h"
#include "tessera/compiler.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tests/common/dense_ref.h"
#include "tests/common/example_cnn.h"

namespace tessera {
namespace {

using compiler::DType;
using compiler::Graph;
using compiler::Node;
using Kind = compiler::FeatureLayerSpec::Kind;

tessera::ChipShape chip_of(int n) {
  const driver::DeviceConfig c = driver::chip_for_array(n);
  return {c.n, c.ub_bytes, c.acc_rows};
}

uint32_t base_seed() {
  const char* s = std::getenv("TESSERA_GRAPH_SEED");
  return s ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : 20261205u;
}

// Checks one architecture at array size n; returns a failure description or "".
void check_model(const test::Arch& a, int n, bool adam, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " N " + std::to_string(n) + ": " +
               test::describe(a));
  const auto opt_kind =
      adam ? compiler::OptimizerSpec::Kind::kAdam : compiler::OptimizerSpec::Kind::kSgd;
  const Graph g = compiler::compile_graph(a.spec, opt_kind, chip_of(n), a.batch);
  // nothing unfused that the emitters have no separate lowering for; every node placed
  for (const Node& x : g.nodes()) {
    if (x.dead) continue;
    for (const char* gone :
         {"bias_add", "relu", "dropout", "relu_grad", "dropout_grad", "softmax_cross_entropy",
          "softmax_cross_entropy_grad", "accuracy", "reduce_sum", "adam", "sgd_momentum"})
      EXPECT_NE(x.op, gone) << x.name;
    EXPECT_FALSE(x.phase.empty()) << x.name;
    // every MXU operand is bf16 (directly or through a transpose of a bf16 value)
    if (x.op.find("matmul") != std::string::npos || x.op.find("conv2d") != std::string::npos)
      for (size_t k = 0; k < (x.op.find("matmul_ones") != std::string::npos ? 1u : 2u); ++k)
        EXPECT_EQ(g.at(x.inputs[k]).dtype, DType::kBf16) << x.name << " operand " << k;
  }
  // one optimizer update per parameter, fused into its gradient's epilogue
  size_t params = 0, updates = 0;
  for (const Node& x : g.nodes()) {
    if (x.dead) continue;
    params += x.op == "param";
    if (x.op.rfind("fused.", 0) == 0 &&
        x.op.find(adam ? "_adam" : "_sgd_momentum") != std::string::npos)
      updates += x.name.find(", ") == std::string::npos ? 1 : 2;
  }
  EXPECT_EQ(updates, params);
  // the phases the graph assigns are the program's, in its order
  const compiler::DenseStackStep step(a.spec, {}, chip_of(n), a.batch, 0);
  std::vector<std::string> program;
  for (const auto& p : step.stats().phases) program.push_back(p.name);
  EXPECT_EQ(compiler::graph_phases(g), program);
}

TEST(GraphIr, RandomDenseStacksLowerToTheirProgramsPhases) {
  const uint32_t seed0 = base_seed();
  for (uint32_t i = 0; i < 40; ++i) {
    std::mt19937 rng(seed0 + i);
    test::Arch a = test::random_arch(rng);
    if (i % 4 == 1)
      a.spec.norm = {true, 0.01f * float(i), 0.05f + 0.01f * float(i)};  // Normalization first
    check_model(a, i % 2 ? 16 : 4, i % 3 != 0, seed0 + i);
  }
}

TEST(GraphIr, RandomConvNetsLowerToTheirProgramsPhases) {
  const uint32_t seed0 = base_seed() + 1000;
  for (uint32_t i = 0; i < 40; ++i) {
    std::mt19937 rng(seed0 + i);
    test::Arch a = test::random_conv_arch(rng);
    if (i % 4 == 1)
      a.spec.norm = {true, 0.01f * float(i), 0.05f + 0.01f * float(i)};  // Normalization first
    check_model(a, i % 2 ? 16 : 4, i % 3 != 0, seed0 + i);
  }
}

TEST(GraphIr, TwoConvNetworkFusesByPattern) {
  compiler::DenseStackSpec s;
  s.input_shape = {28, 28, 1};
  compiler::FeatureLayerSpec c1, p, c2;
  c1.filters = 32, c1.kernel = 3, c1.relu = true;
  p.kind = Kind::kMaxPool, p.pool = 2;
  c2 = c1;
  c2.filters = 64;
  s.features = {c1, p, c2, p};
  s.inputs = 5 * 5 * 64;
  compiler::DenseLayerSpec hidden{128, true, 0.5f, 7};
  s.layers = {hidden, compiler::DenseLayerSpec{10, false}};
  check_model({s, 128}, 16, true, 0);
  const Graph g =
      compiler::compile_graph(s, compiler::OptimizerSpec::Kind::kAdam, chip_of(16), 128);
  auto op_of = [&](const std::string& name) {
    const int id = g.find(name);
    return id < 0 ? std::string("(absent)") : g.at(id).op;
  };
  // conv1 (26 x 26, 32 filters) takes maxpool2 and keeps its argmax (conv_pool_fused); conv3's
  // 11 x 11 map is odd: its pool stays a layer of its own
  EXPECT_EQ(op_of("maxpool2.p"), "fused.conv2d_bias_relu_maxpool");
  EXPECT_EQ(op_of("conv1.y"), "(absent)");
  EXPECT_EQ(op_of("conv3.y"), "fused.conv2d_bias_relu");
  EXPECT_EQ(op_of("dense1.drop"), "fused.matmul_bias_relu_dropout");
  EXPECT_EQ(op_of("loss, acc, dlogits"), "fused.matmul_bias_softmax_xent");
  // dense2's input gradient applies dense1's relu and Dropout gradients in its epilogue
  EXPECT_EQ(op_of("ddense1.a"), "fused.matmul_relu_grad");
  // the pools' gradients apply the convolutions' relu gradients
  EXPECT_EQ(op_of("dconv3.a"), "fused.maxpool_grad_relu");
  EXPECT_EQ(op_of("dconv1.a"), "fused.maxpool_relu_grad");
  // conv3's input gradient exists, conv1's does not (its input is the images)
  EXPECT_EQ(op_of("dmaxpool2.p"), "conv2d_input_grad");
  EXPECT_EQ(op_of("dx"), "(absent)");
  // one input channel at stride 1, 32 filters (a multiple of N = 16): [dW; db] in one matmul
  EXPECT_EQ(op_of("conv1.W', conv1.b'"), "fused.conv2d_filter_bias_grad_adam");
  EXPECT_EQ(op_of("conv3.W'"), "fused.conv2d_filter_grad_adam");
  EXPECT_EQ(op_of("conv3.b'"), "fused.matmul_ones_adam");
  // at N = 64 the 32 filters are no multiple of N: two updates (the pattern needs it)
  const Graph g64 =
      compiler::compile_graph(s, compiler::OptimizerSpec::Kind::kAdam, chip_of(64), 128);
  EXPECT_GE(g64.find("conv1.W'"), 0);
  EXPECT_GE(g64.find("conv1.b'"), 0);
  EXPECT_LT(g64.find("conv1.W', conv1.b'"), 0);
}

TEST(GraphIr, TheExampleCnnLowersWithItsConvPoolFusion) {
  const compiler::DenseStackSpec spec = test::example_cnn_spec();
  const Graph g = compiler::compile_graph(spec, compiler::OptimizerSpec::Kind::kAdam,
                                          chip_of(16), 8);
  const compiler::DenseStackStep step(spec, {}, chip_of(16), 8, 0);
  std::vector<std::string> program;
  for (const auto& p : step.stats().phases) program.push_back(p.name);
  EXPECT_EQ(compiler::graph_phases(g), program);
  EXPECT_EQ(g.at(g.find("maxpool2.p")).op, "fused.conv2d_bias_relu_maxpool");
  EXPECT_EQ(g.at(g.find("dconv1.a")).op, "fused.maxpool_relu_grad");
  // (the routing runs in the convolution's weight gradient: its phase)
  EXPECT_EQ(g.at(g.find("dconv1.a")).phase, "bwd_conv1");
}

TEST(GraphIr, AnOpWithNoLoweringIsRefusedNamingItAndItsLayer) {
  Graph h = compiler::compile_graph(test::example_cnn_spec(), compiler::OptimizerSpec::Kind::kAdam,
                                    chip_of(16), 4);
  const int extra = h.add("softmax", "extra", {h.find("flat")}, {4, 5408}, DType::kF32);
  h.at(extra).layer = 2;
  try {
    compiler::lower(h);
    ADD_FAILURE() << "lowered an unknown op";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'softmax' (extra, layer dense1)"), std::string::npos)
        << e.what();
  }
}

TEST(GraphIr, AutodiffMakesOnlyTheGradientsTheUpdatesNeed) {
  // an MLP: no gradient flows into the images, so the first layer has no input gradient
  compiler::DenseStackSpec s;
  s.input_shape = {28, 28, 1};
  s.inputs = 784;
  s.layers = {compiler::DenseLayerSpec{64, true}, compiler::DenseLayerSpec{10, false}};
  Graph g = compiler::build_forward(s, 8);
  compiler::autodiff(g);
  EXPECT_LT(g.find("dflat"), 0);
  EXPECT_LT(g.find("dx"), 0);
  EXPECT_GE(g.find("ddense1.y"), 0);
  for (const char* p : {"dense1.W'", "dense1.b'", "dense2.W'", "dense2.b'"})
    EXPECT_GE(g.find(p), 0) << p;
  EXPECT_EQ(g.at(g.find("ddense1.W")).shape, (std::vector<uint32_t>{784, 64}));
}

}  // namespace
}  // namespace tessera
