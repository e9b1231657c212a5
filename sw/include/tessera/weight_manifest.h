// The weight export's manifest (docs/training.md, "Weight export"): WEIGHTS_DIR/manifest.json
// lists the model's layers in order, each weighted one with its "kernel" and "bias" tensors
// ({"file": NAME, "shape": [...]}, raw little-endian fp32 files beside it), and a
// "normalization" {mean, variance} when the model starts with one. tessera evaluate reads it
// back against the model description; the parser is fuzzed (fuzz/fuzz_weights.cc).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::runlog {

// Every error names the manifest (`name`) first, then the layer and the field.
class WeightManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ManifestTensor {
  std::string file;  // a plain file name in the export folder
  std::vector<uint64_t> shape;
  uint64_t count() const;  // the product of the shape
};

// A weighted layer's tensors and where the manifest lists it ("layers[i] (Class)").
struct ManifestLayer {
  std::string where;
  ManifestTensor kernel, bias;
};

// What the model description says the export must hold: its weighted layers in order (class
// "Conv2D" or "Dense", activation "relu", "linear" or "softmax", the kernel's shape: Conv2D
// [kh][kw][in][filters], Dense [in][units]; the bias is [last dimension]) and its
// Normalization, if any.
struct ExpectedWeights {
  struct Layer {
    std::string class_name, activation;
    std::vector<uint64_t> kernel_shape;
  };
  std::vector<Layer> layers;
  bool normalization = false;
  float mean = 0, variance = 0;
};

// Parses `text` and checks it against `want`: the format is tessera-dense-weights-1 or
// tessera-sequential-weights-1; the weighted layers are as many as the model's, each of its
// class and activation; every tensor has a plain file name and exactly the shape the model
// gives it; a "normalization" is there, with the same mean and variance as floats, exactly
// when the model has one.
std::vector<ManifestLayer> parse_weight_manifest(const std::string& text, const std::string& name,
                                                 const ExpectedWeights& want);

}  // namespace tessera::runlog
