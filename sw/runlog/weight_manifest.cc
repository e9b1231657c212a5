// The weight export's manifest (tessera/weight_manifest.h).
#include "tessera/weight_manifest.h"

#include <nlohmann/json.hpp>

namespace tessera::runlog {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw WeightManifestError(name + ": " + what);
}

ManifestTensor tensor(const Json& t, const std::string& name, const std::string& where,
                      uint64_t want, uint32_t last) {
  if (!t.is_object() || !t.contains("file") || !t["file"].is_string() || !t.contains("shape") ||
      !t["shape"].is_array())
    fail(name, where + ": needs \"file\" (a string) and \"shape\" (an array)");
  ManifestTensor r;
  r.file = t["file"].get<std::string>();
  if (r.file.empty() || r.file == "." || r.file == ".." ||
      r.file.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    fail(name, where + ": file '" + r.file + "' is not a plain file name in the folder");
  uint64_t count = 1;
  for (const auto& d : t["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() == 0 || d.get<uint64_t>() > (1u << 30))
      fail(name, where + ": shape " + t["shape"].dump() + ": dimensions must be 1 to 2^30");
    r.shape.push_back(d.get<uint64_t>());
    count *= r.shape.back();
    if (count > (uint64_t{1} << 34)) fail(name, where + ": shape " + t["shape"].dump() + " too large");
  }
  if (r.shape.empty() || count != want || r.shape.back() != last)
    fail(name, where + ": shape " + t["shape"].dump() + " does not fit the model (" +
                   std::to_string(want) + " values, last dimension " + std::to_string(last) +
                   ")");
  return r;
}

}  // namespace

uint64_t ManifestTensor::count() const {
  uint64_t c = 1;
  for (uint64_t d : shape) c *= d;
  return c;
}

std::vector<ManifestLayer> parse_weight_manifest(
    const std::string& text, const std::string& name,
    const std::vector<std::pair<uint32_t, uint32_t>>& shapes) {
  Json m;
  try {
    m = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(name, std::string("not JSON: ") + e.what());
  }
  if (!m.is_object()) fail(name, "not a JSON object");
  const Json& f = m.contains("format") ? m["format"] : Json();
  const std::string format = f.is_string() ? f.get<std::string>() : "";
  if (format != "tessera-dense-weights-1" && format != "tessera-sequential-weights-1")
    fail(name, "format '" + format +
                   "' is not a Tessera weight export (tessera-dense-weights-1, "
                   "tessera-sequential-weights-1)");
  if (!m.contains("layers") || !m["layers"].is_array()) fail(name, "no \"layers\" array");
  std::vector<ManifestLayer> out;
  const Json& layers = m["layers"];
  for (size_t i = 0; i < layers.size(); ++i) {
    const Json& l = layers[i];
    if (!l.is_object()) fail(name, "layers[" + std::to_string(i) + "] is not an object");
    if (!l.contains("kernel")) continue;
    const Json& cn = l.contains("class_name") ? l["class_name"] : Json();
    const std::string where = "layers[" + std::to_string(i) + "] (" +
                              (cn.is_string() ? cn.get<std::string>() : std::string("?")) + ")";
    const size_t j = out.size();
    if (j >= shapes.size())
      fail(name, where + ": more weighted layers than the model's " +
                     std::to_string(shapes.size()));
    const auto [K, U] = shapes[j];
    ManifestLayer ml;
    ml.where = where;
    ml.kernel = tensor(l["kernel"], name, where + " kernel", uint64_t{K} * U, U);
    ml.bias = tensor(l.contains("bias") ? l["bias"] : Json(), name, where + " bias", U, U);
    out.push_back(std::move(ml));
  }
  if (out.size() != shapes.size())
    fail(name, std::to_string(out.size()) + " weighted layers, the model has " +
                   std::to_string(shapes.size()));
  return out;
}

}  // namespace tessera::runlog
