// Model description files: a Keras Sequential written as JSON (docs/training.md, "Model
// files"), read by `tessera train --model FILE` and `tessera compile --model FILE`:
//
//   {"name": "example_cnn", "input_shape": [28, 28, 1],
//    "layers": [{"class_name": "Conv2D", "filters": 32, "kernel_size": 3, "activation": "relu"},
//               {"class_name": "MaxPool2D", "pool_size": 2},
//               {"class_name": "Flatten"},
//               {"class_name": "Dense", "units": 10, "activation": "softmax"}]}
//
// The parser checks the file against the Keras layers and arguments it knows (Conv2D,
// MaxPool2D, AveragePool2D, Flatten, Dense, Dropout) and their shapes, layer by layer; what the
// chip compiler lowers today is a further check (keras::lowerable_spec). Errors name the file
// and the line and column (syntax) or the layer and argument (meaning).
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
// The canonical JSON of a description (every argument spelled out); parsing it gives the same
// description back.
std::string model_description_json(const ModelDescription& m);
// The example CNN: Conv2D(32, 3, relu) -> MaxPool2D(2) -> Flatten -> Dense(10, softmax) on
// 28x28x1 (the default of tessera train and compile; examples/models/example_cnn.json).
ModelDescription example_cnn();

}  // namespace tessera::keras
