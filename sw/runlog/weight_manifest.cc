// The weight export's manifest (tessera/weight_manifest.h).
#include "tessera/weight_manifest.h"

#include <nlohmann/json.hpp>

namespace tessera::runlog {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw WeightManifestError(name + ": " + what);
}

// A shape as the export writes it: "[3,3,1,4]" (validated values only: an unvalidated JSON
// value is never printed, however deep it nests).
std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

ManifestTensor tensor(const Json& t, const std::string& name, const std::string& where,
                      const std::vector<uint64_t>& want) {
  if (!t.is_object() || !t.contains("file") || !t["file"].is_string() || !t.contains("shape") ||
      !t["shape"].is_array())
    fail(name, where + ": needs \"file\" (a string) and \"shape\" (an array)");
  ManifestTensor r;
  r.file = t["file"].get<std::string>();
  if (r.file.empty() || r.file == "." || r.file == ".." ||
      r.file.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    fail(name, where + ": file '" + r.file + "' is not a plain file name in the folder");
  const Json& shape = t["shape"];
  if (shape.size() > 8)
    fail(name, where + ": shape has " + std::to_string(shape.size()) + " dimensions");
  for (size_t k = 0; k < shape.size(); ++k) {
    if (!shape[k].is_number_unsigned() || shape[k].get<uint64_t>() == 0 ||
        shape[k].get<uint64_t>() > (uint64_t{1} << 30))
      fail(name,
           where + ": shape element " + std::to_string(k) + " is not an integer from 1 to 2^30");
    r.shape.push_back(shape[k].get<uint64_t>());
  }
  if (r.shape != want)
    fail(name, where + ": shape " + shape_text(r.shape) + ", the model's is " + shape_text(want));
  return r;
}

std::string string_or(const Json& l, const char* key, const std::string& otherwise) {
  return l.contains(key) && l[key].is_string() ? l[key].get<std::string>() : otherwise;
}

}  // namespace

uint64_t ManifestTensor::count() const {
  uint64_t c = 1;
  for (uint64_t d : shape) c *= d;
  return c;
}

std::vector<ManifestLayer> parse_weight_manifest(const std::string& text, const std::string& name,
                                                 const ExpectedWeights& want) {
  Json m;
  try {
    m = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(name, std::string("not JSON: ") + e.what());
  }
  if (!m.is_object()) fail(name, "not a JSON object");
  const std::string format = string_or(m, "format", "");
  if (format != "tessera-dense-weights-1" && format != "tessera-sequential-weights-1")
    fail(name, "format '" + format +
                   "' is not a Tessera weight export (tessera-dense-weights-1, "
                   "tessera-sequential-weights-1)");
  if (m.contains("normalization") != want.normalization)
    fail(name, want.normalization ? "no \"normalization\": the model starts with one"
                                  : "a \"normalization\": the model has none");
  if (want.normalization) {
    const Json& n = m["normalization"];
    auto value = [&](const char* key) {
      if (!n.is_object() || !n.contains(key) || !n[key].is_number())
        fail(name, std::string("normalization: needs a number \"") + key + "\"");
      return static_cast<float>(n[key].get<double>());
    };
    if (value("mean") != want.mean || value("variance") != want.variance)
      fail(name, "normalization: mean and variance differ from the model's");
  }
  if (!m.contains("layers") || !m["layers"].is_array()) fail(name, "no \"layers\" array");
  std::vector<ManifestLayer> out;
  const Json& layers = m["layers"];
  for (size_t i = 0; i < layers.size(); ++i) {
    const Json& l = layers[i];
    if (!l.is_object()) fail(name, "layers[" + std::to_string(i) + "] is not an object");
    if (!l.contains("kernel")) continue;
    const std::string cls = string_or(l, "class_name", "?");
    const std::string where = "layers[" + std::to_string(i) + "] (" + cls + ")";
    const size_t j = out.size();
    if (j >= want.layers.size())
      fail(name,
           where + ": more weighted layers than the model's " + std::to_string(want.layers.size()));
    const ExpectedWeights::Layer& w = want.layers[j];
    if (cls != w.class_name)
      fail(name,
           where + ": the model's weighted layer " + std::to_string(j) + " is a " + w.class_name);
    const std::string act = string_or(l, "activation", "");
    if (act != w.activation)
      fail(name, where + ": activation '" + act + "', the model's is '" + w.activation + "'");
    ManifestLayer ml;
    ml.where = where;
    ml.kernel = tensor(l["kernel"], name, where + " kernel", w.kernel_shape);
    ml.bias = tensor(l.contains("bias") ? l["bias"] : Json(), name, where + " bias",
                     {w.kernel_shape.empty() ? 0 : w.kernel_shape.back()});
    out.push_back(std::move(ml));
  }
  if (out.size() != want.layers.size())
    fail(name, std::to_string(out.size()) + " weighted layers, the model has " +
                   std::to_string(want.layers.size()));
  return out;
}

}  // namespace tessera::runlog
