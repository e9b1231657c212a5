// Model description files (tessera/model_file.h): the example file is the example CNN the
// Keras API builds; the canonical JSON parses back to the same description; Keras's to_json
// nesting reads the same; shapes are followed layer by layer; every malformed or unsupported
// file gets a message naming the file and the line and column, or the layer and argument.
#include <gtest/gtest.h>

#include <fstream>

#include "tessera/dense_step.h"
#include "tessera/keras.h"
#include "tessera/model_file.h"

namespace tessera::keras {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_model_description(text, "m.json");
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "(accepted)";
}

const char* kExample = R"({
  "name": "example_cnn",
  "input_shape": [28, 28, 1],
  "layers": [
    {"class_name": "Conv2D", "filters": 32, "kernel_size": 3, "activation": "relu"},
    {"class_name": "MaxPool2D", "pool_size": 2},
    {"class_name": "Flatten"},
    {"class_name": "Dense", "units": 10, "activation": "softmax"}
  ]
})";

TEST(ModelFile, TheExampleFileIsTheExampleCnn) {
  const ModelDescription m = load_model_description("examples/models/example_cnn.json");
  const ModelDescription want = example_cnn();
  EXPECT_EQ(m.name, want.name);
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_TRUE(m.layers == want.layers);
  EXPECT_TRUE(parse_model_description(kExample, "x").layers == want.layers);
  // and the compiler reads it as the spec it has always compiled
  const compiler::CnnSpec s = lowerable_spec(m.layers), d{};
  EXPECT_EQ(s.height, d.height);
  EXPECT_EQ(s.filters, d.filters);
  EXPECT_EQ(s.kernel, d.kernel);
  EXPECT_EQ(s.pool, d.pool);
  EXPECT_EQ(s.classes, d.classes);
}

TEST(ModelFile, CanonicalJsonRoundTrips) {
  const char* models[] = {
      kExample,
      R"({"input_shape": [32, 32, 3], "layers": [
          {"class_name": "Conv2D", "filters": 16, "kernel_size": [5, 5], "strides": 2,
           "padding": "same"},
          {"class_name": "AveragePooling2D", "pool_size": 3, "strides": 2},
          {"class_name": "Conv2D", "filters": 8, "kernel_size": 1, "activation": "relu"},
          {"class_name": "MaxPooling2D", "pool_size": [2, 2], "strides": [3, 3]},
          {"class_name": "Flatten"},
          {"class_name": "Dense", "units": 128, "activation": "relu"},
          {"class_name": "Dropout", "rate": 0.3, "seed": 7},
          {"class_name": "Dense", "units": 10, "activation": null}]})",
      R"({"layers": [{"class_name": "Flatten", "input_shape": [28, 28, 1]},
                     {"class_name": "Dense", "units": 256, "activation": "relu"},
                     {"class_name": "Dense", "units": 10, "activation": "softmax"}]})",
  };
  for (const char* text : models) {
    const ModelDescription a = parse_model_description(text, "a");
    const std::string json = model_description_json(a);
    const ModelDescription b = parse_model_description(json, "b");
    EXPECT_TRUE(a.layers == b.layers) << json;
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(model_description_json(b), json);
  }
  // the parsed values themselves
  const ModelDescription m = parse_model_description(models[1], "a");
  ASSERT_EQ(m.layers.size(), 8u);
  EXPECT_EQ(m.layers[0].kind, Layer::Kind::kConv2D);
  EXPECT_EQ(m.layers[0].size, 5u);
  EXPECT_EQ(m.layers[0].stride(), 2u);
  EXPECT_EQ(m.layers[0].padding, "same");
  EXPECT_EQ(m.layers[0].activation, "");
  EXPECT_EQ((m.layers[0].input_shape), (std::array<uint32_t, 3>{32, 32, 3}));
  EXPECT_EQ(m.layers[1].kind, Layer::Kind::kAveragePool2D);
  EXPECT_EQ(m.layers[1].size, 3u);
  EXPECT_EQ(m.layers[1].stride(), 2u);
  EXPECT_EQ(m.layers[3].stride(), 3u);
  EXPECT_EQ(m.layers[6].kind, Layer::Kind::kDropout);
  EXPECT_EQ(m.layers[6].rate, 0.3f);
  EXPECT_EQ(m.layers[6].seed, 7u);
  EXPECT_EQ(m.layers[7].activation, "");
}

// Keras's Normalization (scalar statistics) as the first layer: parsed, written back, handed
// to the general compiler's spec; anywhere else, or with bad statistics, refused by name.
TEST(ModelFile, NormalizationIsTheFirstLayerOnly) {
  const char* text = R"({"input_shape": [28, 28, 1], "layers": [
      {"class_name": "Normalization", "mean": [0.25], "variance": 0.0625, "axis": -1},
      {"class_name": "Flatten"},
      {"class_name": "Dense", "units": 10, "activation": "softmax"}]})";
  const ModelDescription a = parse_model_description(text, "a");
  ASSERT_EQ(a.layers.size(), 3u);
  EXPECT_EQ(a.layers[0].kind, Layer::Kind::kNormalization);
  EXPECT_EQ(a.layers[0].mean, 0.25f);
  EXPECT_EQ(a.layers[0].variance, 0.0625f);
  const std::string json = model_description_json(a);
  EXPECT_TRUE(parse_model_description(json, "b").layers == a.layers) << json;
  const compiler::DenseStackSpec spec = dense_stack_spec(a.layers);
  EXPECT_TRUE(spec.norm.on);
  EXPECT_EQ(spec.norm.mean, 0.25f);
  EXPECT_EQ(spec.norm.variance, 0.0625f);
  EXPECT_EQ(spec.inputs, 784u);
  ASSERT_EQ(spec.layers.size(), 1u);
  EXPECT_TRUE(is_dense_stack(a.layers)) << "a normalized model is the general compiler's";
  EXPECT_FALSE(dense_stack_spec(parse_model_description(kExample, "e").layers).norm.on);

  const std::string head = R"({"input_shape": [28, 28, 1], "layers": [)";
  const std::string tail = R"(, {"class_name": "Flatten"}, {"class_name": "Dense", "units": 10}]})";
  const std::pair<std::string, std::string> bad[] = {
      {R"({"class_name": "Normalization", "variance": 1})", "layers[0] (Normalization): needs 'mean'"},
      {R"({"class_name": "Normalization", "mean": 0})", "needs 'variance'"},
      {R"({"class_name": "Normalization", "mean": 0, "variance": 0})",
       "'variance' must be above 0"},
      {R"({"class_name": "Normalization", "mean": "a", "variance": 1})",
       "'mean' must be a finite number"},
      {R"({"class_name": "Normalization", "mean": [0, 1], "variance": 1})",
       "'mean' must be a finite number"},
      {R"({"class_name": "Normalization", "mean": 0, "variance": 1, "axis": 1})",
       "'axis' must be -1"},
      {R"({"class_name": "Normalization", "mean": 0, "variance": 1, "invert": true})",
       "unknown argument 'invert'"},
      {R"({"class_name": "Conv2D", "filters": 4, "kernel_size": 3}, )"
       R"({"class_name": "Normalization", "mean": 0, "variance": 1})",
       "layers[1] (Normalization): only as the first layer"},
  };
  for (const auto& [layer, want] : bad)
    EXPECT_NE(error_of(head + layer + tail).find(want), std::string::npos)
        << layer << "\n  -> " << error_of(head + layer + tail);
  // the compiler's own check, for a description built in code
  std::vector<Layer> two = a.layers;
  two.insert(two.begin() + 1, Normalization(0, 1));
  try {
    dense_stack_spec(two);
    ADD_FAILURE() << "a second Normalization was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1 (Normalization): only as the first layer"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelFile, KerasToJsonNestingReadsTheSame) {
  const char* nested = R"({"class_name": "Sequential", "name": "example_cnn", "layers": [
      {"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 32, "kernel_size": [3, 3],
       "strides": [1, 1], "padding": "valid", "activation": "relu", "use_bias": true,
       "input_shape": [28, 28, 1]}},
      {"class_name": "MaxPooling2D", "config": {"pool_size": [2, 2]}},
      {"class_name": "Flatten", "config": {}},
      {"class_name": "Dense", "config": {"units": 10, "activation": "softmax"}}]})";
  EXPECT_TRUE(parse_model_description(nested, "n").layers == example_cnn().layers);
}

TEST(ModelFile, MalformedFilesNameWhereAndWhat) {
  struct Case {
    std::string text, want;
  } cases[] = {
      {"{\"layers\": [\n  {\"class_name\": \"Dense\",, }]}", "m.json:2:26: not JSON"},
      {"", "m.json:1:1: not JSON"},
      // a number beyond a double: the JSON reader's out_of_range, not its parse_error (fuzz_model)
      {R"({"input_shape": [1e999, 28, 1], "layers": []})",
       "m.json: not JSON: number overflow parsing '1e999'"},
      {"[1, 2]", "m.json: the model must be a JSON object"},
      {R"({"input_shape": [28, 28, 1]})", "needs \"layers\""},
      {R"({"input_shape": [28, 28, 1], "layers": []})", "needs \"layers\""},
      {R"({"input_shape": [28, 28, 1], "layer": []})", "unknown key 'layer'"},
      {R"({"class_name": "Functional", "layers": []})", "'class_name' must be \"Sequential\""},
      {R"({"input_shape": [28, 28], "layers": [{"class_name": "Flatten"}]})",
       "'input_shape' must be [height, width, channels]"},
      {R"({"input_shape": [0, 28, 1], "layers": [{"class_name": "Flatten"}]})",
       "'input_shape' entries must be integers from 1 to 1024"},
      {R"({"layers": [{"class_name": "Flatten"}, {"class_name": "Dense", "units": 10}]})",
       "layers[0] (Flatten): the model needs 'input_shape'"},
      {R"({"input_shape": [28, 28, 1], "layers": [7]})", "layers[0]: must be an object"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"filters": 3}]})",
       "layers[0]: needs \"class_name\""},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "LSTM", "units": 3}]})",
       "layers[0] (LSTM): unknown layer class"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "kernel_size": 3}]})",
       "layers[0] (Conv2D): needs 'filters'"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 0,
           "kernel_size": 3}]})",
       "layers[0] (Conv2D): 'filters' must be an integer from 1 to 65536, not 0"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 9}]})",
       "layers[0] (Conv2D): 'kernel_size' must be an integer from 1 to 7, not 9"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": [3, 5]}]})",
       "'kernel_size' must be an integer or a pair of equal integers"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 3, "strides": 4}]})",
       "'strides' must be an integer from 1 to 2, not 4"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 3, "padding": "causal"}]})",
       "'padding' must be one of valid, same, not \"causal\""},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 3, "activation": "tanh"}]})",
       "'activation' must be one of relu, linear, not \"tanh\""},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 3, "filter": 3}]})",
       "layers[0] (Conv2D): unknown argument 'filter'"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 3, "use_bias": false}]})",
       "'use_bias' must be true"},
      {R"({"input_shape": [4, 4, 1], "layers": [{"class_name": "Conv2D", "filters": 4,
           "kernel_size": 5}]})",
       "a 5x5 kernel does not fit its (4, 4, 1) input"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "MaxPool2D", "pool_size": 4}]})",
       "layers[0] (MaxPool2D): 'pool_size' must be an integer from 2 to 3, not 4"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "MaxPool2D"}]})",
       "layers[1] (MaxPool2D): needs an image input"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Dense", "units": 10}]})",
       "layers[0] (Dense): needs a flat input, but its input is (28, 28, 1): add a Flatten"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "Dense", "units": 10.5}]})",
       "layers[1] (Dense): 'units' must be an integer from 1 to 65536, not 10.5"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "Dropout", "rate": 1.0}, {"class_name": "Dense", "units": 10}]})",
       "layers[1] (Dropout): 'rate' must be a number from 0 up to (not including) 1"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "Dropout", "rate": 0.5, "seed": -1}, {"class_name": "Dense",
           "units": 10}]})",
       "layers[1] (Dropout): 'seed' must be a non-negative integer"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "Dense", "units": 10, "input_shape": [28, 28, 1]}]})",
       "layers[1] (Dense): 'input_shape' belongs on the first layer only"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten",
           "input_shape": [28, 28, 1]}, {"class_name": "Dense", "units": 10}]})",
       "'input_shape' is given twice"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten"},
           {"class_name": "Dense", "units": 10}, {"class_name": "Dropout", "rate": 0.1}]})",
       "layers[2] (Dropout): the last layer must be the Dense layer"},
      {R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Flatten", "config": {},
           "units": 3}, {"class_name": "Dense", "units": 10}]})",
       "arguments go either in 'config' or beside class_name, not both"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_NE(e.find(c.want), std::string::npos) << "message: " << e << "\nwant: " << c.want;
    EXPECT_EQ(e.rfind("m.json", 0), 0u) << e;  // every message names the file first
  }
  // a file that is not there, and one that is not a model
  EXPECT_THROW(load_model_description("no/such/model.json"), ModelFileError);
}

TEST(ModelFile, TheCompilerNamesWhatItDoesNotLowerYet) {
  auto refusal = [](const char* text) {
    try {
      lowerable_spec(parse_model_description(text, "m").layers);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(lowered)");
  };
  EXPECT_NE(refusal(R"({"layers": [{"class_name": "Flatten", "input_shape": [28, 28, 1]},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("layer 0 is Flatten, expected Conv2D"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu", "strides": 2},
                       {"class_name": "MaxPool2D"}, {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("layer 0 (Conv2D): strides must be 1, not 2"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu"},
                       {"class_name": "AveragePooling2D"}, {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("layer 1 is AveragePool2D, expected MaxPool2D"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu"},
                       {"class_name": "MaxPool2D", "pool_size": 2, "strides": 3},
                       {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("layer 1 (MaxPool2D): strides must equal pool_size (2), not 3"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::keras
