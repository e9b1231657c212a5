// Model description files (tessera/model_file.h): the example file is the example CNN the
// Keras API builds; the canonical JSON parses back to the same description; Keras's to_json
// nesting reads the same, and so do whole files as Keras 2 and Keras 3's model.to_json() write
// them (the same descriptions as the project's own files); shapes are followed layer by layer;
// every malformed or unsupported file, and every Keras argument the chip cannot honour, gets a
// message naming the file and the line and column, or the layer and argument.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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
  // and the compiler reads it as Conv2D(32, 3, relu) -> MaxPool2D(2) -> Flatten -> Dense(10)
  const compiler::DenseStackSpec s = dense_stack_spec(m.layers);
  ASSERT_EQ(s.features.size(), 2u);
  EXPECT_EQ(s.input_shape.h, 28u);
  EXPECT_EQ(s.features[0].filters, 32u);
  EXPECT_EQ(s.features[0].kernel, 3u);
  EXPECT_TRUE(s.features[0].relu);
  EXPECT_EQ(s.features[1].pool, 2u);
  EXPECT_EQ(s.inputs, 13u * 13u * 32u);
  EXPECT_EQ(s.classes(), 10u);
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
       "layers[0] (Normalization): 'invert' must be false"},
      {R"({"class_name": "Normalization", "mean": 0, "variance": 1, "center": true})",
       "unknown argument 'center'"},
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

// ---- whole files as Keras's model.to_json() writes them ----

std::string text_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Keras 3 (keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(32, 3, activation="relu"),
// layers.MaxPooling2D(2), layers.Flatten(), layers.Dense(10, activation="softmax")],
// name="example_cnn").to_json()): every object in its module/class_name/config/registered_name
// envelope, dtypes as DTypePolicy objects, InputLayer's batch_shape, build_config on the layers
// that have weights or shapes.
const char* kKeras3ExampleCnn = R"({"module": "keras", "class_name": "Sequential", "config": {"name": "example_cnn", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "dtype": "float32", "sparse": false, "ragged": false, "name": "input_layer"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Conv2D", "config": {"name": "conv2d", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}}, {"module": "keras.layers", "class_name": "MaxPooling2D", "config": {"name": "max_pooling2d", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last"}, "registered_name": null, "build_config": {"input_shape": [null, 13, 13, 32]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 5408]}}], "build_input_shape": [null, 28, 28, 1]}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}})";

// Keras 2.2 (standalone): no InputLayer, the first layer's config carries batch_input_shape,
// Glorot uniform spelled as VarianceScaling(1, fan_avg, uniform), no groups or dtype on pools.
const char* kOldKerasExampleCnn = R"({"class_name": "Sequential", "config": {"name": "example_cnn", "layers": [{"class_name": "Conv2D", "config": {"name": "conv2d_1", "trainable": true, "batch_input_shape": [null, 28, 28, 1], "dtype": "float32", "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "activation": "relu", "use_bias": true, "kernel_initializer": {"class_name": "VarianceScaling", "config": {"scale": 1.0, "mode": "fan_avg", "distribution": "uniform", "seed": null}}, "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d_1", "trainable": true, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}}, {"class_name": "Flatten", "config": {"name": "flatten_1", "trainable": true, "data_format": "channels_last"}}, {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"class_name": "VarianceScaling", "config": {"scale": 1.0, "mode": "fan_avg", "distribution": "uniform", "seed": null}}, "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]}, "keras_version": "2.2.4", "backend": "tensorflow"})";

// Keras 2 (tf.keras 2.12-2.15), the two-conv network built as Conv2D(32, 3, activation="relu",
// input_shape=(28, 28, 1)), ...: the InputLayer Keras adds and the first layer's
// batch_input_shape both give the input; initializers in Keras 2.13's module/registered_name
// envelope; Dropout with noise_shape and seed.
const char* kKeras2TwoConv = R"({"class_name": "Sequential", "config": {"name": "two_conv_cnn", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1], "dtype": "float32", "sparse": false, "ragged": false, "name": "conv2d_input"}}, {"class_name": "Conv2D", "config": {"name": "conv2d", "trainable": true, "dtype": "float32", "batch_input_shape": [null, 28, 28, 1], "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d", "trainable": true, "dtype": "float32", "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}}, {"class_name": "Conv2D", "config": {"name": "conv2d_1", "trainable": true, "dtype": "float32", "filters": 64, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d_1", "trainable": true, "dtype": "float32", "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}}, {"class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": "float32", "data_format": "channels_last"}}, {"class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": "float32", "units": 128, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "Dropout", "config": {"name": "dropout", "trainable": true, "dtype": "float32", "rate": 0.5, "noise_shape": null, "seed": null}}, {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "dtype": "float32", "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]}, "keras_version": "2.13.1", "backend": "tensorflow"})";

// Keras 3, the normalized two-conv network (Normalization(mean=0.28604, variance=0.12463)
// first): Normalization writes axis as the tuple [-1] and invert; newer Keras 3 writes
// InputLayer's optional and Dense's quantization_config.
const char* kKeras3TwoConvNormalized = R"({"module": "keras", "class_name": "Sequential", "config": {"name": "two_conv_cnn_normalized", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "dtype": "float32", "sparse": false, "ragged": false, "name": "input_layer", "optional": false}, "registered_name": null}, {"module": "keras.layers", "class_name": "Normalization", "config": {"name": "normalization", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "axis": [-1], "invert": false, "mean": 0.28604, "variance": 0.12463}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}}, {"module": "keras.layers", "class_name": "Conv2D", "config": {"name": "conv2d", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}}, {"module": "keras.layers", "class_name": "MaxPooling2D", "config": {"name": "max_pooling2d", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Conv2D", "config": {"name": "conv2d_1", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters": 64, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 13, 13, 32]}}, {"module": "keras.layers", "class_name": "MaxPooling2D", "config": {"name": "max_pooling2d_1", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last"}, "registered_name": null, "build_config": {"input_shape": [null, 5, 5, 64]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 128, "activation": "relu", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null, "quantization_config": null}, "registered_name": null, "build_config": {"input_shape": [null, 1600]}}, {"module": "keras.layers", "class_name": "Dropout", "config": {"name": "dropout", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "rate": 0.5, "seed": null, "noise_shape": null}, "registered_name": null}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null, "quantization_config": null}, "registered_name": null, "build_config": {"input_shape": [null, 128]}}], "build_input_shape": [null, 28, 28, 1]}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}})";

// `text` with its first `from` replaced by `to` (the test's mistake if `from` is not there).
std::string with(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "the fixture has no " << from;
    return text;
  }
  return text.substr(0, at) + to + text.substr(at + from.size());
}

void expect_same(const ModelDescription& got, const ModelDescription& want, const char* what) {
  EXPECT_EQ(got.name, want.name) << what;
  EXPECT_TRUE(got.layers == want.layers) << what << ":\n"
                                         << model_description_json(got) << "want:\n"
                                         << model_description_json(want);
  // the canonical form is the same text, and reads back to the same description
  EXPECT_EQ(model_description_json(got), model_description_json(want)) << what;
  const ModelDescription back = parse_model_description(model_description_json(got), "back");
  EXPECT_EQ(back.name, got.name) << what;
  EXPECT_TRUE(back.layers == got.layers) << what;
}

TEST(ModelFile, ReadsKerasToJson) {
  const ModelDescription want = load_model_description("examples/models/example_cnn.json");
  // the example file: Keras 2's to_json of the example CNN, as written
  const ModelDescription keras2 = load_model_description("examples/models/example_cnn_keras.json");
  expect_same(keras2, want, "examples/models/example_cnn_keras.json");
  EXPECT_TRUE(keras2.layers == example_cnn().layers);
  expect_same(parse_model_description(kKeras3ExampleCnn, "k3"), want, "Keras 3");
  expect_same(parse_model_description(kOldKerasExampleCnn, "k22"), want, "Keras 2.2");
  // Keras 2.1 and older: "config" is the list of layers (no model name)
  const std::string keras21 =
      R"({"class_name": "Sequential", "config": [{"class_name": "Conv2D", "config": {"name": "conv2d_1", "trainable": true, "batch_input_shape": [null, 28, 28, 1], "dtype": "float32", "filters": 32, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1], "activation": "relu", "use_bias": true}}, {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d_1", "trainable": true, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}}, {"class_name": "Flatten", "config": {"name": "flatten_1", "trainable": true}}, {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "units": 10, "activation": "softmax", "use_bias": true}}], "keras_version": "2.1.6", "backend": "tensorflow"})";
  const ModelDescription k21 = parse_model_description(keras21, "k21");
  EXPECT_EQ(k21.name, "");
  EXPECT_TRUE(k21.layers == want.layers);
  // what Keras may also write, and what does not change the computation, reads the same
  const std::string k2text = text_of("examples/models/example_cnn_keras.json");
  const std::pair<std::string, std::string> same[] = {
      // the initializers by name
      {R"({"class_name": "GlorotUniform", "config": {"seed": null}})", R"("glorot_uniform")"},
      {R"({"class_name": "Zeros", "config": {}})", R"("zeros")"},
      // a frozen layer without weights computes the same
      {R"("name": "max_pooling2d", "trainable": true)", R"("name": "max_pooling2d", "trainable": false)"},
      // the pool's alias, and Keras 3's optional input and compile_config of a model never compiled
      {R"("class_name": "MaxPooling2D")", R"("class_name": "MaxPool2D")"},
      {R"("ragged": false)", R"("ragged": false, "optional": false)"},
      {R"("backend": "tensorflow")", R"("backend": "jax", "compile_config": null)"},
      // the model's build_input_shape agreeing with its InputLayer
      {R"("name": "example_cnn", )", R"("name": "example_cnn", "build_input_shape": [null, 28, 28, 1], )"},
      // Keras 2's mixed-precision Policy object when it is float32
      {R"("name": "flatten", "trainable": true, "dtype": "float32")",
       R"("name": "flatten", "trainable": true, "dtype": {"class_name": "Policy", "config": {"name": "float32"}})"},
  };
  for (const auto& [from, to] : same) {
    const std::string text = with(k2text, from, to);
    try {
      EXPECT_TRUE(parse_model_description(text, "v").layers == want.layers) << to;
    } catch (const ModelFileError& e) {
      ADD_FAILURE() << to << " refused: " << e.what();
    }
  }
}

TEST(ModelFile, ReadsKerasTwoConvNetworks) {
  const ModelDescription two = load_model_description("examples/models/two_conv_cnn.json");
  expect_same(parse_model_description(kKeras2TwoConv, "k2"), two, "Keras 2 two-conv");
  // Keras 3's spelling of the same network: the normalized one without its Normalization
  std::string keras3 = with(kKeras3TwoConvNormalized, "two_conv_cnn_normalized", "two_conv_cnn");
  const size_t norm = keras3.find(R"({"module": "keras.layers", "class_name": "Normalization")");
  const size_t conv = keras3.find(R"({"module": "keras.layers", "class_name": "Conv2D")");
  ASSERT_NE(norm, std::string::npos);
  ASSERT_LT(norm, conv);
  keras3.erase(norm, conv - norm);
  expect_same(parse_model_description(keras3, "k3"), two, "Keras 3 two-conv");
  const ModelDescription normalized =
      load_model_description("examples/models/two_conv_cnn_normalized.json");
  const ModelDescription k3n = parse_model_description(kKeras3TwoConvNormalized, "k3n");
  expect_same(k3n, normalized, "Keras 3 normalized two-conv");
  EXPECT_EQ(k3n.layers[0].mean, 0.28604f);
  EXPECT_EQ(k3n.layers[0].variance, 0.12463f);
  EXPECT_TRUE(dense_stack_spec(k3n.layers).norm.on);
  // AveragePooling2D and its alias AvgPool2D are the project's AveragePool2D; Keras's
  // seeded Dropout keeps its seed
  const std::string avg = with(with(with(kKeras2TwoConv, R"("class_name": "MaxPooling2D")",
                                         R"("class_name": "AveragePooling2D")"),
                                    R"("class_name": "MaxPooling2D")",
                                    R"("class_name": "AvgPool2D")"),
                               R"("noise_shape": null, "seed": null)",
                               R"("noise_shape": null, "seed": 1234)");
  const ModelDescription a = parse_model_description(avg, "avg");
  ASSERT_EQ(a.layers.size(), 8u);
  EXPECT_TRUE(a.layers[1] == AveragePool2D(2));
  EXPECT_TRUE(a.layers[3] == AveragePool2D(2));
  EXPECT_TRUE(a.layers[6] == Dropout(0.5f, 1234));
  expect_same(a, parse_model_description(model_description_json(a), "c"), "round trip");
}

// Every argument value the chip cannot honour, and every malformed Keras envelope, is refused
// by name: the file, the layer (its index in the file's list, InputLayer counted, and class),
// the argument.
TEST(ModelFile, KerasArgumentsTheChipCannotHonourAreRefused) {
  using ::testing::HasSubstr;
  using ::testing::StartsWith;
  const std::string k2 = text_of("examples/models/example_cnn_keras.json");
  const std::string k3 = kKeras3ExampleCnn;
  const std::string two = kKeras2TwoConv;
  const std::string norm = kKeras3TwoConvNormalized;
  const std::string old = kOldKerasExampleCnn;
  struct Case {
    std::string text, want;
  } cases[] = {
      // Conv2D
      {with(k2, R"("data_format": "channels_last", "dilation_rate")",
            R"("data_format": "channels_first", "dilation_rate")"),
       "layers[1] (Conv2D): 'data_format' must be channels_last"},
      {with(k2, R"("dilation_rate": [1, 1])", R"("dilation_rate": [2, 2])"),
       "layers[1] (Conv2D): 'dilation_rate' must be 1 or [1, 1] (the chip has no dilated "
       "convolution), not [2, 2]"},
      {with(k2, R"("groups": 1)", R"("groups": 2)"), "layers[1] (Conv2D): 'groups' must be 1"},
      {with(k2, R"("use_bias": true)", R"("use_bias": false)"),
       "layers[1] (Conv2D): 'use_bias' must be true"},
      {with(k2, R"("kernel_size": [3, 3])", R"("kernel_size": [3, 5])"),
       "layers[1] (Conv2D): 'kernel_size' must be an integer or a pair of equal integers"},
      {with(k2, R"("strides": [1, 1])", R"("strides": [1, 2])"),
       "layers[1] (Conv2D): 'strides' must be an integer or a pair of equal integers"},
      {with(k2, R"("activation": "relu")", R"("activation": "tanh")"),
       "layers[1] (Conv2D): 'activation' must be one of relu, linear, not \"tanh\""},
      {with(k2, R"("name": "conv2d", "trainable": true)", R"("name": "conv2d", "trainable": false)"),
       "layers[1] (Conv2D): 'trainable' must be true"},
      {with(k2, R"({"class_name": "GlorotUniform", "config": {"seed": null}})",
            R"({"class_name": "HeNormal", "config": {"seed": null}})"),
       "layers[1] (Conv2D): 'kernel_initializer' must be GlorotUniform (the chip's initial kernels "
       "are Glorot uniform), not HeNormal"},
      {with(k2, R"("seed": null)", R"("seed": 42)"),
       "layers[1] (Conv2D): 'kernel_initializer' has the seed 42"},
      {with(k2, R"({"class_name": "Zeros", "config": {}})", R"({"class_name": "Ones", "config": {}})"),
       "layers[1] (Conv2D): 'bias_initializer' must be Zeros"},
      {with(old, R"("distribution": "uniform")", R"("distribution": "truncated_normal")"),
       "layers[0] (Conv2D): 'kernel_initializer' must be GlorotUniform"},
      {with(k2, R"("kernel_regularizer": null)",
            R"("kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.01}})"),
       "layers[1] (Conv2D): 'kernel_regularizer' must be null (the chip's training step adds no "
       "weight penalty), not L2"},
      {with(k2, R"("groups": 1)", R"("groups": 1, "depth_multiplier": 2)"),
       "layers[1] (Conv2D): unknown argument 'depth_multiplier'"},
      // the pool, Flatten
      {with(k2, R"("pool_size": [2, 2])", R"("pool_size": [2, 3])"),
       "layers[2] (MaxPooling2D): 'pool_size' must be an integer or a pair of equal integers"},
      {with(k2, R"("strides": [2, 2])", R"("strides": [2, 3])"),
       "layers[2] (MaxPooling2D): 'strides' must be an integer or a pair of equal integers"},
      {with(k2, R"("pool_size": [2, 2], "padding": "valid")",
            R"("pool_size": [2, 2], "padding": "same")"),
       "layers[2] (MaxPooling2D): 'padding' must be one of valid, not \"same\""},
      {with(k2, R"("name": "flatten", "trainable": true, "dtype": "float32", "data_format": "channels_last")",
            R"("name": "flatten", "trainable": true, "dtype": "float32", "data_format": "channels_first")"),
       "layers[3] (Flatten): 'data_format' must be channels_last"},
      {with(k2, R"("class_name": "Flatten")", R"("class_name": "GlobalAveragePooling2D")"),
       "layers[3] (GlobalAveragePooling2D): unknown layer class"},
      // Dense
      {with(k2, R"("activation": "softmax")", R"("activation": "sigmoid")"),
       "layers[4] (Dense): 'activation' must be one of relu, softmax, linear, not \"sigmoid\""},
      {with(k2, R"("units": 10, "activation": "softmax", "use_bias": true)",
            R"("units": 10, "activation": "softmax", "use_bias": false)"),
       "layers[4] (Dense): 'use_bias' must be true"},
      {with(k2, R"("name": "dense", "trainable": true, "dtype": "float32")",
            R"("name": "dense", "trainable": true, "dtype": "float16")"),
       "layers[4] (Dense): 'dtype' must be float32 (tessera has one precision: fp32 weights and "
       "sums, bf16 MXU operands), not \"float16\""},
      {with(k2, R"("activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]})",
            R"("activity_regularizer": {"class_name": "L1", "config": {"l1": 0.01}}, "kernel_constraint": null, "bias_constraint": null}}]})"),
       "layers[4] (Dense): 'activity_regularizer' must be null"},
      {with(k2, R"("kernel_constraint": null, "bias_constraint": null}}]})",
            R"("kernel_constraint": {"class_name": "MaxNorm", "config": {"max_value": 1, "axis": 0}}, "bias_constraint": null}}]})"),
       "layers[4] (Dense): 'kernel_constraint' must be null (the chip's update applies no "
       "constraint), not MaxNorm"},
      {with(k2, R"("bias_constraint": null}}]})", R"("bias_constraint": {"class_name": "NonNeg", "config": {}}}}]})"),
       "layers[4] (Dense): 'bias_constraint' must be null"},
      // Dropout, Normalization
      {with(two, R"("noise_shape": null)", R"("noise_shape": [null, 1])"),
       "layers[7] (Dropout): 'noise_shape' must be null"},
      {with(norm, R"("invert": false)", R"("invert": true)"),
       "layers[1] (Normalization): 'invert' must be false"},
      {with(norm, R"("mean": 0.28604, "variance": 0.12463)", R"("mean": null, "variance": null)"),
       "layers[1] (Normalization): needs 'mean'"},
      {with(norm, R"("axis": [-1])", R"("axis": [1, 2])"),
       "layers[1] (Normalization): 'axis' must be -1"},
      // the input
      {with(k2, R"("batch_input_shape": [null, 28, 28, 1])", R"("batch_input_shape": [null, 784])"),
       "layers[0] (InputLayer): 'batch_input_shape' must be [null, height, width, channels]"},
      {with(k2, R"("batch_input_shape": [null, 28, 28, 1])", R"("batch_input_shape": [32, 28, 28, 1])"),
       "layers[0] (InputLayer): 'batch_input_shape' must leave the batch size null"},
      {with(k2, R"("sparse": false)", R"("sparse": true)"),
       "layers[0] (InputLayer): 'sparse' must be false"},
      {with(k3, R"("batch_shape": [null, 28, 28, 1], "dtype": "float32")",
            R"("batch_shape": [null, 28, 28, 1], "dtype": "int32")"),
       "layers[0] (InputLayer): 'dtype' must be float32"},
      {with(two, R"("dtype": "float32", "batch_input_shape": [null, 28, 28, 1])",
            R"("dtype": "float32", "batch_input_shape": [null, 32, 32, 1])"),
       "layers[1] (Conv2D): 'batch_input_shape' (32, 32, 1) disagrees with the input shape "
       "(28, 28, 1) of layers[0] (InputLayer)"},
      {with(k2, R"("class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": "float32", "data_format": "channels_last"})",
            R"("class_name": "InputLayer", "config": {"batch_input_shape": [null, 13, 13, 32]})"),
       "layers[3] (InputLayer): must be the first layer"},
      {R"({"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1]}}]}})",
       "m.json: needs a layer besides the InputLayer"},
      {with(k3, R"("build_input_shape": [null, 28, 28, 1])", R"("build_input_shape": [null, 28, 28, 3])"),
       "m.json: config: 'build_input_shape' (28, 28, 3) disagrees with the input shape (28, 28, 1)"},
      // Keras 3's envelope, dtype policies, build_config
      {with(k3, R"({"module": "keras.layers", "class_name": "Dense")",
            R"({"module": "my_package.layers", "class_name": "Dense")"),
       "layers[4] (Dense): 'module' must be one of Keras's"},
      {with(k3, R"("registered_name": null, "build_config": {"input_shape": [null, 5408]})",
            R"("registered_name": "MyPackage>Dense", "build_config": {"input_shape": [null, 5408]})"),
       "layers[4] (Dense): 'registered_name' must be null"},
      {with(k3, R"("name": "flatten", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"})",
            R"("name": "flatten", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_float16"})"),
       "layers[3] (Flatten): 'dtype' must be float32 (tessera has one precision: fp32 weights "
       "and sums, bf16 MXU operands), not "
       "DTypePolicy(mixed_float16)"},
      {with(k3, R"("build_config": {"input_shape": [null, 13, 13, 32]})",
            R"("build_config": {"input_shape": [null, 14, 14, 32]})"),
       "layers[3] (Flatten): 'build_config' has the input_shape [null, 14, 14, 32], but the layers "
       "before give this layer [null, 13, 13, 32]"},
      {with(k3, R"("units": 10, )", R"("units": 10, "lora_rank": 4, )"),
       "layers[4] (Dense): 'lora_rank' must be null"},
      {with(norm, R"("quantization_config": null}, "registered_name": null, "build_config": {"input_shape": [null, 128]})",
            R"("quantization_config": {"class_name": "Int8QuantizationConfig", "config": {}}}, "registered_name": null, "build_config": {"input_shape": [null, 128]})"),
       "layers[9] (Dense): 'quantization_config' must be null"},
      // the model
      {with(k2, R"({"class_name": "Sequential")", R"({"class_name": "Functional")"),
       "m.json: 'class_name' must be \"Sequential\", not \"Functional\""},
      {with(k2, R"("backend": "tensorflow")", R"("backend": "tensorflow", "weights": [])"),
       "m.json: unknown key 'weights'"},
      {with(k3, R"("name": "example_cnn", "trainable": true)", R"("name": "example_cnn", "trainable": false)"),
       "m.json: config: 'trainable' must be true"},
      {with(k3, R"("build_input_shape": [null, 28, 28, 1]}, )",
            R"("build_input_shape": [null, 28, 28, 1]}, "compile_config": {"optimizer": "adam", "loss": "sparse_categorical_crossentropy"}, )"),
       "m.json: 'compile_config' must be null"},
      {with(k2, R"("backend": "tensorflow")", R"("backend": "tensorflow", "layers": [])"),
       "m.json: give the layers either in Keras's \"config\" or as \"layers\", not both"},
      {with(k2, R"({"name": "example_cnn", "layers": )", R"({"name": "example_cnn", "layer": )"),
       "m.json: config: unknown key 'layer'"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_THAT(e, HasSubstr(c.want));
    EXPECT_THAT(e, StartsWith("m.json"));
  }
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
      dense_stack_spec(parse_model_description(text, "m").layers);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(lowered)");
  };
  EXPECT_NE(refusal(R"({"layers": [{"class_name": "Flatten", "input_shape": [28, 28, 1]},
                       {"class_name": "Dense", "units": 10, "activation": "relu"}]})")
                .find("the last Dense layer's activation must be softmax, not 'relu'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu", "strides": 3},
                       {"class_name": "MaxPool2D"}, {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("strides"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu"},
                       {"class_name": "MaxPool2D", "pool_size": 2, "strides": 3},
                       {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})")
                .find("layer 1 (MaxPool2D): strides must equal pool_size (2), not 3"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"input_shape": [28, 28, 1], "layers": [
                       {"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
                        "activation": "relu", "strides": 2, "padding": "same"},
                       {"class_name": "AveragePooling2D"}, {"class_name": "Flatten"},
                       {"class_name": "Dense", "units": 10, "activation": "softmax"}]})"),
            "(lowered)");
}

}  // namespace
}  // namespace tessera::keras
