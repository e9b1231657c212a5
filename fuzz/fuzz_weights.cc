// fuzz_weights: the weight export's manifest parser (sw/runlog/weight_manifest.cc: what
// `tessera evaluate` reads from WEIGHTS_DIR/manifest.json) on arbitrary bytes, against two
// models' parameter shapes (an MLP 784-16-10 and a conv net's [9 x 4] kernel, [676 x 10]).
// Properties: a rejection is a WeightManifestError whose message starts with the manifest's
// name; an accepted manifest has one entry per parameter, each kernel of K U values with last
// dimension U and each bias [U], every file a plain name (no '/', not "." or "..").
// Any other exception or a sanitizer report is a finding.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "tessera/weight_manifest.h"

namespace r = tessera::runlog;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::vector<std::pair<uint32_t, uint32_t>>> models = {
      {{784, 16}, {16, 10}}, {{9, 4}, {676, 10}}};
  for (const auto& shapes : models) {
    std::vector<r::ManifestLayer> layers;
    try {
      layers = r::parse_weight_manifest(text, "w/manifest.json", shapes);
    } catch (const r::WeightManifestError& e) {
      FUZZ_CHECK(starts_with(e.what(), "w/manifest.json: "), e.what());
      continue;
    }
    FUZZ_CHECK(layers.size() == shapes.size(), std::to_string(layers.size()));
    for (size_t j = 0; j < layers.size(); ++j) {
      const auto [K, U] = shapes[j];
      const auto& l = layers[j];
      FUZZ_CHECK(l.kernel.count() == uint64_t{K} * U && l.kernel.shape.back() == U, l.where);
      FUZZ_CHECK(l.bias.count() == U && l.bias.shape.back() == U, l.where);
      for (const auto* t : {&l.kernel, &l.bias})
        FUZZ_CHECK(!t->file.empty() && t->file != "." && t->file != ".." &&
                       t->file.find('/') == std::string::npos,
                   t->file);
    }
  }
  return 0;
}
