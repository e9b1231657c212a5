// fuzz_model: the model description parser (sw/keras/model_file.cc: what `tessera train
// --model` and `tessera compile --model` read) on arbitrary bytes, then the compiler's check
// of what it lowers (keras::dense_stack_spec).
// Properties: a rejection is a ModelFileError whose message starts with the source name; an
// accepted model has 1 to 64 layers, the input shape on its first, and ends in a Dense layer;
// its canonical JSON parses back to the same layers and prints the same text again;
// dense_stack_spec either returns a spec ending in the model's classes or throws
// std::invalid_argument ("compile: ...").
// Any other exception or a sanitizer report is a finding.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_check.h"
#include "tessera/keras.h"
#include "tessera/model_file.h"

namespace k = tessera::keras;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  k::ModelDescription m;
  try {
    m = k::parse_model_description(text, "fuzz.json");
  } catch (const k::ModelFileError& e) {
    FUZZ_CHECK(starts_with(e.what(), "fuzz.json"), e.what());
    return 0;
  }
  FUZZ_CHECK(!m.layers.empty() && m.layers.size() <= 64, std::to_string(m.layers.size()));
  const auto& in = m.layers.front().input_shape;
  FUZZ_CHECK(in[0] >= 1 && in[1] >= 1 && in[2] >= 1, "input shape");
  FUZZ_CHECK(m.layers.back().kind == k::Layer::Kind::kDense, "last layer");
  const std::string json = k::model_description_json(m);
  k::ModelDescription again;
  try {
    again = k::parse_model_description(json, "canonical");
  } catch (const k::ModelFileError& e) {
    FUZZ_CHECK(false, std::string("canonical JSON refused: ") + e.what() + "\n" + json);
  }
  FUZZ_CHECK(again.layers == m.layers && again.name == m.name, json);
  FUZZ_CHECK(k::model_description_json(again) == json, json);
  try {
    const tessera::compiler::DenseStackSpec s = k::dense_stack_spec(m.layers);
    FUZZ_CHECK(!s.layers.empty() && s.classes() == m.layers.back().units, json);
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(starts_with(e.what(), "compile: "), e.what());
  }
  return 0;
}
