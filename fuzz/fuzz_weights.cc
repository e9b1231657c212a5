// fuzz_weights: the weight export's manifest parser (sw/runlog/weight_manifest.cc: what
// `tessera evaluate` reads from WEIGHTS_DIR/manifest.json) on arbitrary bytes, against two
// models: an MLP 784-16-10 and a conv net (Normalization, Conv2D(4, 3) [3,3,1,4], Dense(10)
// [676,10]).
// Properties: a rejection is a WeightManifestError whose message starts with the manifest's
// name; an accepted manifest has one entry per weighted layer, each kernel of exactly the
// model's shape and each bias [its last dimension], every file a plain name (no '/', not "."
// or ".."). Any other exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "tessera/weight_manifest.h"

namespace r = tessera::runlog;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  r::ExpectedWeights mlp, conv;
  mlp.layers = {{"Dense", "relu", {784, 16}}, {"Dense", "softmax", {16, 10}}};
  conv.layers = {{"Conv2D", "relu", {3, 3, 1, 4}}, {"Dense", "softmax", {676, 10}}};
  conv.normalization = true;
  conv.mean = 0.28604f;
  conv.variance = 0.12463f;
  for (const r::ExpectedWeights* want : {&mlp, &conv}) {
    std::vector<r::ManifestLayer> layers;
    try {
      layers = r::parse_weight_manifest(text, "w/manifest.json", *want);
    } catch (const r::WeightManifestError& e) {
      FUZZ_CHECK(starts_with(e.what(), "w/manifest.json: "), e.what());
      continue;
    }
    FUZZ_CHECK(layers.size() == want->layers.size(), std::to_string(layers.size()));
    for (size_t j = 0; j < layers.size(); ++j) {
      const auto& l = layers[j];
      FUZZ_CHECK(l.kernel.shape == want->layers[j].kernel_shape, l.where);
      FUZZ_CHECK(l.bias.shape == std::vector<uint64_t>{want->layers[j].kernel_shape.back()},
                 l.where);
      for (const auto* t : {&l.kernel, &l.bias})
        FUZZ_CHECK(!t->file.empty() && t->file != "." && t->file != ".." &&
                       t->file.find('/') == std::string::npos,
                   t->file);
    }
  }
  return 0;
}
