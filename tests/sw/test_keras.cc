// The Keras-style API (tessera/keras.h) on the functional backend: compile refuses what the chip
// compiler cannot lower, with the reason; fit drives the callbacks and the step counter;
// save_weights / load_weights round-trip the weights bit for bit and refuse another
// architecture's file; evaluate and predict agree with each other (the accuracy evaluate reports
// is the argmax of predict's probabilities, and its loss their mean cross-entropy); the views a
// TensorBoard callback takes: the training graph as a GraphDef and the last step's gradients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <tuple>

#include "sw/compiler/graph.h"
#include "sw/runlog/protobuf.h"
#include "tests/common/test_util.h"
#include "tessera/checkpoint.h"
#include "tessera/keras.h"
#include "tessera/tfevents.h"

namespace tessera::keras {
namespace {

data::Dataset synthetic(uint32_t count, uint32_t seed) {
  data::Dataset ds;
  ds.count = count;
  ds.rows = ds.cols = 28;
  std::mt19937 rng(seed);
  ds.images.resize(size_t{count} * 784);
  ds.labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    ds.labels[i] = static_cast<uint8_t>(rng() % 10);
    // a class-dependent blob so that training has something to learn
    for (uint32_t p = 0; p < 784; ++p)
      ds.images[size_t{i} * 784 + p] = static_cast<uint8_t>(
          (p / 28 + p % 28) % 10 == ds.labels[i] ? 200 + rng() % 56 : rng() % 40);
  }
  return ds;
}

Sequential example(uint32_t filters = 32) {
  return Sequential(
      {Conv2D(filters, 3, "relu", {28, 28, 1}), MaxPool2D(2), Flatten(), Dense(10, "softmax")});
}

std::string compile_error(Sequential m, const std::string& loss = "sparse_categorical_crossentropy",
                          DeviceOptions d = {}) {
  try {
    m.compile(Adam(), loss, {"accuracy"}, d, 8);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Keras, CompileRefusesWhatTheChipCompilerCannotLower) {
  // (the messages name the layer and the argument: tests/sw/test_model_file.cc has them all)
  EXPECT_NE(compile_error(Sequential({Conv2D(32, 3, "tanh", {28, 28, 1}), MaxPool2D(2), Flatten(),
                                      Dense(10, "softmax")}))
                .find("tanh"),
            std::string::npos);
  EXPECT_NE(compile_error(Sequential({Flatten(), Dense(10, "relu")})), "");
  EXPECT_NE(compile_error(example(), "mse").find("loss"), std::string::npos);
  DeviceOptions rtl8;
  rtl8.backend = driver::Backend::kRtl;
  rtl8.array = 8;
  EXPECT_NE(compile_error(example(), "sparse_categorical_crossentropy", rtl8).find("array sizes"),
            std::string::npos);
}

struct Counter : Callback {
  int begin = 0, steps = 0, end = 0;
  uint64_t last_step = 0;
  void on_train_begin(Sequential&) override { ++begin; }
  void on_step_end(Sequential&, StepLogs& l) override {
    ++steps;
    last_step = l.step;
    EXPECT_TRUE(std::isfinite(l.loss));
  }
  void on_train_end(Sequential&) override { ++end; }
};

TEST(Keras, FitSaveLoadEvaluatePredict) {
  const data::Dataset train = synthetic(64, 1), test = synthetic(20, 2);
  Sequential a = example();
  a.compile(Adam(1e-3f), "sparse_categorical_crossentropy", {"accuracy"}, {}, 8, 3);
  Counter cb;
  FitOptions fo;
  fo.steps = 4;
  fo.callbacks = {&cb};
  const History h = a.fit(train, fo);
  EXPECT_EQ(h.loss.size(), 4u);
  EXPECT_EQ(cb.begin, 1);
  EXPECT_EQ(cb.steps, 4);
  EXPECT_EQ(cb.end, 1);
  EXPECT_EQ(cb.last_step, 3u);
  EXPECT_EQ(a.step(), 4u);

  char tmpl[] = "/tmp/tessera_test_keras.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/weights.tsr";
  a.save_weights(path);
  Sequential b = example();
  b.compile(Adam(1e-3f), "sparse_categorical_crossentropy", {"accuracy"}, {}, 8, 99);
  b.load_weights(path);
  const compiler::DenseParams pa = a.get_weights(), pb = b.get_weights();
  ASSERT_EQ(pa.kernel.size(), 2u);
  for (size_t j = 0; j < pa.kernel.size(); ++j) {
    EXPECT_TRUE(pa.kernel[j] == pb.kernel[j]) << j;
    EXPECT_TRUE(pa.bias[j] == pb.bias[j]) << j;
  }

  // evaluate (batch 8: two full batches and one of 4) and predict agree
  const EvalResult ea = a.evaluate(test), eb = b.evaluate(test);
  EXPECT_EQ(ea.samples, 20u);
  EXPECT_EQ(ea.loss, eb.loss);
  EXPECT_EQ(ea.accuracy, eb.accuracy);
  const std::vector<float> p = a.predict(test);
  ASSERT_EQ(p.size(), 200u);
  double loss = 0;
  int correct = 0;
  for (int i = 0; i < 20; ++i) {
    double sum = 0;
    int best = 0;
    for (int c = 0; c < 10; ++c) {
      sum += p[i * 10 + c];
      if (p[i * 10 + c] > p[i * 10 + best]) best = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << i;
    correct += best == test.labels[i];
    loss -= std::log(double{p[i * 10 + test.labels[i]]});
  }
  EXPECT_NEAR(ea.accuracy, correct / 20.0, 1e-12);
  EXPECT_NEAR(ea.loss, loss / 20.0, 1e-4 * std::max(1.0, ea.loss));

  // another architecture's weights are refused, naming the file
  Sequential c = example(16);
  c.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {}, 8);
  try {
    c.load_weights(path);
    ADD_FAILURE() << "loaded another model's weights";
  } catch (const runlog::CheckpointError& e) {
    EXPECT_EQ(e.kind(), runlog::CheckpointError::Kind::kSignatureMismatch);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  ::rmdir(tmpl);
}

// TPUStrategy: a model built under it is replicated; fit trains every replica on its shard of
// the global batch and all replicas end each step with the same weights, close to one chip's.
TEST(Keras, TPUStrategyReplicatesTheModel) {
  const data::Dataset train = synthetic(64, 4), test = synthetic(16, 5);
  TPUStrategy strategy(2);
  Sequential dp({Conv2D(32, 3, "relu", {28, 28, 1}), MaxPool2D(2), Flatten(), Dense(10, "softmax")},
                strategy);
  DeviceOptions d;
  d.array = 4;
  dp.compile(Adam(1e-3f), "sparse_categorical_crossentropy", {"accuracy"}, d, 8, 3);
  ASSERT_EQ(dp.replicas(), 2);
  ASSERT_NE(dp.cluster(), nullptr);
  EXPECT_EQ(dp.train_step().batch(), 4u) << "each replica trains on half the global batch";
  // (the state is the same tensors on any number of chips: a checkpoint moves between them)
  EXPECT_EQ(dp.signature(), example().signature().empty() ? "" : dp.signature());
  Sequential one = example();
  one.compile(Adam(1e-3f), "sparse_categorical_crossentropy", {"accuracy"}, d, 8, 3);
  FitOptions fo;
  fo.steps = 3;
  const History hd = dp.fit(train, fo), h1 = one.fit(train, fo);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(hd.loss[i], h1.loss[i], 1e-5 * h1.loss[i]) << i;
    EXPECT_EQ(hd.accuracy[i], h1.accuracy[i]) << i;
  }
  // both replicas hold the bf16 copies and fp32 biases of the state get_weights() merges
  const compiler::DenseStackStep& st = dp.train_step();
  const auto image = st.state_image(dp.get_weights(), dp.get_optimizer_state());
  for (int r = 0; r < 2; ++r)
    for (const auto& range : st.replicated_ranges()) {
      const auto w = std::find_if(image.begin(), image.end(),
                                  [&](const auto& x) { return x.first == range.first; });
      ASSERT_NE(w, image.end());
      EXPECT_TRUE(dp.cluster()->chip(r).read(range.first, range.second) ==
                  std::vector<uint8_t>(w->second.begin(), w->second.begin() + range.second))
          << "replica " << r << ", 0x" << std::hex << range.first;
    }
  const EvalResult e = dp.evaluate(test);
  EXPECT_EQ(e.samples, 16u);
  EXPECT_NEAR(e.loss, one.evaluate(test).loss, 1e-4);
  // prediction on one chip, in the replica's batch
  const std::vector<float> pd = dp.predict(test), po = one.predict(test);
  ASSERT_EQ(pd.size(), po.size());
  for (size_t i = 0; i < pd.size(); ++i) EXPECT_NEAR(pd[i], po[i], 1e-4) << i;
  // a batch of another size is refused, not sliced out of bounds
  data::Batch small;
  small.images.assign(4 * 784, 0);
  small.labels.assign(4, 0);
  EXPECT_THROW(dp.train_on_batch(small), std::invalid_argument);
  // a global batch the replicas do not divide
  Sequential bad(
      {Conv2D(32, 3, "relu", {28, 28, 1}), MaxPool2D(2), Flatten(), Dense(10, "softmax")},
      TPUStrategy(3));
  EXPECT_THROW(bad.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, d, 8),
               std::invalid_argument);
}

// The seed's promise for any model: the same layer list trains on one chip or under
// TPUStrategy(2) with the same per-step loss (only the order of the sums over samples differs):
// a two-conv network with a hidden Dense layer and Dropout (SGD with momentum), and an MLP
// with a cosine learning-rate schedule and label smoothing (Adam).
TEST(Keras, AnyModelTrainsUnderTPUStrategy) {
  const data::Dataset train = synthetic(64, 6);
  struct Case {
    std::vector<Layer> layers;
    compiler::OptimizerSpec opt;
  };
  compiler::OptimizerSpec sgd = SGD(0.05f, 0.9f).spec(), adam = Adam(2e-3f).spec();
  adam.schedule = compiler::OptimizerSpec::Schedule::kCosine;
  adam.decay_steps = 4;
  adam.label_smoothing = 0.1f;
  const std::vector<Case> cases = {
      {{Conv2D(8, 3, "relu", {28, 28, 1}), MaxPool2D(2), Conv2D(16, 3, "relu"), MaxPool2D(2),
        Flatten(), Dense(32, "relu"), Dropout(0.25f, 5), Dense(10, "softmax")},
       sgd},
      {{Flatten(), Dense(48, "relu"), Dense(10, "softmax")}, adam}};
  for (const Case& c : cases) {
    std::vector<Layer> layers = c.layers;
    if (layers.front().kind == Layer::Kind::kFlatten) layers.front().input_shape = {28, 28, 1};
    DeviceOptions d;
    d.array = 4;
    Sequential one(layers), two(layers, TPUStrategy(2));
    one.compile(c.opt, "sparse_categorical_crossentropy", {"accuracy"}, d, 8, 11);
    two.compile(c.opt, "sparse_categorical_crossentropy", {"accuracy"}, d, 8, 11);
    SCOPED_TRACE(one.signature());
    FitOptions fo;
    fo.steps = 4;
    const History h1 = one.fit(train, fo), h2 = two.fit(train, fo);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(h2.loss[i], h1.loss[i], 1e-5 * h1.loss[i]) << i;
      EXPECT_EQ(h2.accuracy[i], h1.accuracy[i]) << i;
    }
    EXPECT_FALSE(one.get_weights().kernel == compiler::glorot_init(one.spec(), 11).kernel);
  }
}

// ---- the views a TensorBoard callback takes ----

// A GraphDef's nodes as read back with the protobuf decoder: name, op, inputs, the string attrs
// and the _output_shapes dims.
struct NodeRead {
  std::string name, op;
  std::vector<std::string> inputs;
  std::map<std::string, std::string> strings;
  std::vector<int64_t> shape;
  bool has_shape = false;
  uint64_t dtype = 0;
};

std::vector<NodeRead> parse_graph_def(const std::string& bytes) {
  namespace proto = runlog::proto;
  std::vector<NodeRead> nodes;
  proto::Reader graph(bytes);
  proto::Field f;
  while (graph.next(f)) {
    EXPECT_EQ(f.number, 1u) << "GraphDef holds nodes only";
    NodeRead n;
    proto::Reader node(f.bytes);
    proto::Field nf;
    while (node.next(nf)) {
      if (nf.number == 1) n.name = std::string(nf.bytes);
      if (nf.number == 2) n.op = std::string(nf.bytes);
      if (nf.number == 3) n.inputs.emplace_back(nf.bytes);
      if (nf.number != 5) continue;
      std::string key;
      std::string_view value;
      proto::Reader entry(nf.bytes);
      proto::Field ef;
      while (entry.next(ef)) {
        if (ef.number == 1) key = std::string(ef.bytes);
        if (ef.number == 2) value = ef.bytes;
      }
      proto::Reader attr(value);
      proto::Field af;
      while (attr.next(af)) {
        if (af.number == 2) n.strings[key] = std::string(af.bytes);
        if (af.number == 6) n.dtype = af.u;
        if (af.number == 1 && key == "_output_shapes") {  // list { shape { dim { size } } }
          proto::Reader list(af.bytes);
          proto::Field lf;
          while (list.next(lf)) {
            n.has_shape = lf.number == 7;
            proto::Reader shape(lf.bytes);
            proto::Field sf;
            while (shape.next(sf)) {
              proto::Reader dim(sf.bytes);
              proto::Field df;
              while (dim.next(df))
                if (df.number == 1) n.shape.push_back(static_cast<int64_t>(df.u));
            }
          }
        }
      }
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// Every live node once, under its scope; inputs name nodes of the graph by their producers; the
// shapes, dtypes and phases are the lowered graph's.
TEST(Keras, GraphDefHoldsTheLoweredTrainingGraph) {
  Layer in = Flatten();
  in.input_shape = {4, 4, 1};
  Sequential mlp({in, Dense(8, "relu"), Dense(10, "softmax")});
  Sequential cnn = example(8);
  DeviceOptions d;
  d.array = 4;
  mlp.compile(SGD(0.1f), "sparse_categorical_crossentropy", {"accuracy"}, d, 8);
  cnn.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, d, 8);
  const std::regex tf_name("[A-Za-z0-9.][A-Za-z0-9_./]*");
  for (Sequential* m : {&mlp, &cnn}) {
    SCOPED_TRACE(m->signature());
    const compiler::Graph& g = m->train_step().graph();
    const std::vector<NodeRead> nodes = parse_graph_def(m->graph_def());
    ASSERT_EQ(nodes.size(), g.live());
    std::map<std::string, const NodeRead*> by_name;
    for (const NodeRead& n : nodes) {
      EXPECT_TRUE(std::regex_match(n.name, tf_name)) << n.name;
      EXPECT_TRUE(by_name.emplace(n.name, &n).second) << "two nodes named " << n.name;
    }
    std::set<std::string> scopes;
    size_t k = 0;
    for (const compiler::Node& gn : g.nodes()) {
      if (gn.dead) continue;
      const NodeRead& n = nodes[k++];
      scopes.insert(n.name.substr(0, n.name.find('/')));
      EXPECT_EQ(n.op, gn.op) << n.name;
      EXPECT_EQ(n.strings.at("value"), gn.name) << n.name;
      EXPECT_EQ(n.strings.at("phase"), gn.phase) << n.name;
      ASSERT_TRUE(n.has_shape) << n.name;
      EXPECT_EQ(n.shape, std::vector<int64_t>(gn.shape.begin(), gn.shape.end())) << n.name;
      EXPECT_EQ(n.dtype, gn.dtype == compiler::DType::kBf16  ? 14u
                         : gn.dtype == compiler::DType::kI32 ? 3u
                                                             : 1u)
          << n.name;
      ASSERT_EQ(n.inputs.size(), gn.inputs.size()) << n.name;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        ASSERT_TRUE(by_name.count(n.inputs[i])) << n.name << " reads " << n.inputs[i];
        EXPECT_EQ(by_name.at(n.inputs[i])->strings.at("value"), g.at(gn.inputs[i]).name);
      }
    }
    EXPECT_EQ(scopes,
              (std::set<std::string>{"input", "variables", "forward", "backward", "optimizer"}));
  }
  // the MLP's names, as TensorBoard groups them
  const std::vector<NodeRead> nodes = parse_graph_def(mlp.graph_def());
  std::set<std::string> names;
  for (const NodeRead& n : nodes) names.insert(n.name);
  for (const char* want : {"input/x", "input/labels", "variables/dense1/W", "variables/dense2/b",
                           "forward/dense1/y", "forward/dense2/loss_acc_dlogits",
                           "backward/dense2/ddense1.a", "optimizer/dense1/W", "optimizer/dense2/b"})
    EXPECT_TRUE(names.count(want)) << want;
  // and in an event file, as TensorBoard reads it
  const test::TempDir dir("tessera_keras");
  std::string path;
  {
    runlog::EventWriter w(dir.path());
    w.add_graph(mlp.graph_def());
    path = w.path();
  }
  EXPECT_EQ(runlog::read_graph_defs(path), std::vector<std::string>{mlp.graph_def()});
}

// A batch of `count` 4 x 4 images with random pixels and labels.
data::Batch small_batch(uint32_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  data::Batch b;
  for (uint32_t i = 0; i < count; ++i) {
    b.labels.push_back(static_cast<uint8_t>(rng() % 10));
    for (int p = 0; p < 16; ++p) b.images.push_back(static_cast<uint8_t>(rng() % 256));
  }
  return b;
}

std::vector<Layer> small_mlp() {
  Layer in = Flatten();
  in.input_shape = {4, 4, 1};
  return {in, Dense(8, "relu"), Dense(10, "softmax")};
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// SGD(lr 1, momentum 0) compiles to velocity = 0 * velocity - 1 * g = -g (exact), w = w + velocity
// (optimizer_lowering.cc): w1 = fl32(w0 - g) bit for bit, for every element.
void expect_sgd_step(const compiler::DenseParams& w0, const compiler::DenseParams& g,
                     const compiler::DenseParams& w1) {
  ASSERT_EQ(g.kernel.size(), w0.kernel.size());
  int bad = 0;
  for (size_t j = 0; j < w0.kernel.size(); ++j)
    for (const auto& [a, d, b, what] :
         {std::tuple{&w0.kernel[j], &g.kernel[j], &w1.kernel[j], "kernel"},
          std::tuple{&w0.bias[j], &g.bias[j], &w1.bias[j], "bias"}}) {
      ASSERT_EQ(d->size(), a->size()) << what << " " << j;
      for (size_t i = 0; i < a->size(); ++i) {
        const float want = (*a)[i] - (*d)[i];
        if (bits((*b)[i]) != bits(want) && bad++ < 10)
          ADD_FAILURE() << what << " " << j << " [" << i << "]: w0 " << (*a)[i] << " g " << (*d)[i]
                        << " w1 " << (*b)[i] << " w0 - g " << want;
      }
    }
  EXPECT_EQ(bad, 0);
}

// The last step's gradients on one chip (compiled with keep_gradients) and under TPUStrategy(2)
// (always split: each replica's all-reduced chunk, gathered): SGD(1) moved the weights by
// exactly them, and both agree up to the order of the sums over samples (one chip accumulates
// all 16 samples' products, two chips 8 each and then add the pair: an ulp apart here).
TEST(Keras, GetGradientsReturnsTheStepsGlobalGradient) {
  const data::Batch batch = small_batch(16, 21);
  DeviceOptions d;
  d.array = 4;
  d.keep_gradients = true;
  std::vector<compiler::DenseParams> grads;
  for (int P : {1, 2}) {
    SCOPED_TRACE(std::to_string(P) + " chips");
    Sequential m(small_mlp(), TPUStrategy(P));
    m.compile(SGD(1.0f, 0.0f), "sparse_categorical_crossentropy", {"accuracy"}, d, 16, 5);
    const compiler::DenseParams w0 = m.get_weights();
    m.train_on_batch(batch);
    const compiler::DenseParams g = m.get_gradients(), w1 = m.get_weights();
    ASSERT_EQ(g.kernel.size(), 2u);
    EXPECT_EQ(g.kernel[0].size(), 16u * 8);
    EXPECT_EQ(g.bias[1].size(), 10u);
    expect_sgd_step(w0, g, w1);
    // the softmax layer's bias gradient: the batch mean of softmax - onehot, summing to 0 up to
    // the bf16 rounding of d logits (2^-9 relative) that the MXU's ones row sums
    double sum = 0, mag = 0;
    for (float v : g.bias[1]) {
      sum += v;
      mag += std::fabs(v);
    }
    EXPECT_GT(mag, 0.1);
    EXPECT_NEAR(sum, 0.0, mag / 512);
    grads.push_back(g);
  }
  for (size_t j = 0; j < grads[0].kernel.size(); ++j)
    for (const auto& [a, b] : {std::pair{&grads[0].kernel[j], &grads[1].kernel[j]},
                               std::pair{&grads[0].bias[j], &grads[1].bias[j]}})
      for (size_t i = 0; i < a->size(); ++i)
        EXPECT_NEAR((*b)[i], (*a)[i], 1e-5 * std::max(std::fabs((*a)[i]), std::fabs((*b)[i])))
            << "layer " << j << " [" << i << "]";
  // a one-chip step compiled without keep_gradients keeps none
  Sequential fused(small_mlp());
  fused.compile(SGD(1.0f), "sparse_categorical_crossentropy", {"accuracy"}, DeviceOptions{}, 8);
  try {
    fused.get_gradients();
    ADD_FAILURE() << "gradients of a fused step";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("keep_gradients"), std::string::npos) << e.what();
  }
}

// keep_gradients only stores the gradients on the way: the weights and optimizer state after two
// steps are the fused step's, bit for bit.
TEST(Keras, KeepGradientsLeavesTheTrainingBitIdentical) {
  std::vector<std::vector<uint32_t>> state(2);
  for (bool keep : {false, true}) {
    DeviceOptions d;
    d.array = 4;
    d.keep_gradients = keep;
    Sequential m(small_mlp());
    m.compile(Adam(1e-2f), "sparse_categorical_crossentropy", {"accuracy"}, d, 8, 9);
    m.train_on_batch(small_batch(8, 1));
    m.train_on_batch(small_batch(8, 2));
    compiler::DenseParams p;
    compiler::DenseOptState s;
    m.get_state(p, s);
    for (const compiler::DenseParams* q : {&p, &s.m, &s.v})
      for (size_t j = 0; j < q->kernel.size(); ++j)
        for (const std::vector<float>* v : {&q->kernel[j], &q->bias[j]})
          for (float f : *v) state[keep].push_back(bits(f));
  }
  ASSERT_FALSE(state[0].empty());
  EXPECT_TRUE(state[0] == state[1]);
}

}  // namespace
}  // namespace tessera::keras
