// Model description files: a Keras Sequential written as JSON (docs/training.md, "Model
// files"), read by `tessera train --model FILE` and `tessera compile --model FILE`:
//
//   {"name": "example_cnn", "input_shape": [28, 28, 1],
//    "layers": [{"class_name": "Conv2D", "filters": 32, "kernel_size": 3, "activation": "relu"},
//               {"class_name": "MaxPool2D", "pool_size": 2},
//               {"class_name": "Flatten"},
//               {"class_name": "Dense", "units": 10, "activation": "softmax"}]}
//
// or the file Keras itself writes with model.to_json() for a Sequential (Keras 2 or 3; e.g.
// examples/models/example_cnn_keras.json):
//
//   {"class_name": "Sequential", "config": {"name": "example_cnn", "layers": [
//      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1], ...}},
//      {"class_name": "Conv2D", "config": {"filters": 32, "kernel_size": [3, 3], ...}}, ...]},
//    "keras_version": "2.13.1", "backend": "tensorflow"}
//
// The parser checks the file against the Keras layers and arguments it knows (InputLayer,
// Normalization, Conv2D, MaxPool2D, AveragePool2D, Flatten, Dense, Dropout, with Keras's
// aliases) and their shapes, layer by layer. Of Keras's to_json arguments it accepts those that
// leave the computation as the chip does it (names, float32 dtype, channels_last, unseeded
// GlorotUniform kernels and Zeros biases, null regularizers and constraints, ...) and refuses
// every other value by name rather than ignore it. What the chip compiler lowers today is a
// further check (keras::dense_stack_spec). Errors name the file and the line and column (syntax)
// or the layer (its index in the file, InputLayer counted, and class) and argument (meaning).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/keras.h"

namespace tessera::keras {

struct ModelDescription {
  std::string name;
  std::vector<Layer> layers;  // input_shape set on the first
};

class ModelFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// `source` names the text in messages (the file's path). Throws ModelFileError.
ModelDescription parse_model_description(std::string_view text, const std::string& source);
ModelDescription load_model_description(const std::string& path);
// The canonical JSON of a description (every argument spelled out) in the project's form, also
// for a description read from Keras's form; parsing it gives the same description back.
std::string model_description_json(const ModelDescription& m);
// The example CNN: Conv2D(32, 3, relu) -> MaxPool2D(2) -> Flatten -> Dense(10, softmax) on
// 28x28x1 (the default of tessera train and compile; examples/models/example_cnn.json).
ModelDescription example_cnn();

}  // namespace tessera::keras
