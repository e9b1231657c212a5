// The weight export's manifest (docs/training.md, "Weight export"): WEIGHTS_DIR/manifest.json
// lists the model's layers in order, each weighted one with its "kernel" and "bias" tensors
// ({"file": NAME, "shape": [...]}, raw little-endian fp32 files beside it). tessera evaluate
// reads it back; the parser is fuzzed (fuzz/fuzz_weights.cc).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
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

// Parses `text` and checks it against the model's parameter shapes (`shapes[j]` = {K, U}: the
// j-th weighted layer's kernel has K U values, its last dimension U; its bias [U]): the
// format is tessera-dense-weights-1 or tessera-sequential-weights-1, the weighted layers are
// as many as `shapes`, every tensor has a plain file name and the shape the model gives it.
std::vector<ManifestLayer> parse_weight_manifest(
    const std::string& text, const std::string& name,
    const std::vector<std::pair<uint32_t, uint32_t>>& shapes);

}  // namespace tessera::runlog
