// The Keras-style API (tessera/keras.h) on the functional backend: compile refuses what the chip
// compiler cannot lower, with the reason; fit drives the callbacks and the step counter;
// save_weights / load_weights round-trip the weights bit for bit and refuse another
// architecture's file; evaluate and predict agree with each other (the accuracy evaluate reports
// is the argmax of predict's probabilities, and its loss their mean cross-entropy).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "tessera/checkpoint.h"
#include "tessera/keras.h"

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

}  // namespace
}  // namespace tessera::keras
