// Model description files (tessera/model_file.h).
#include "tessera/model_file.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::keras {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint32_t kMaxUnits = 65536;  // filters / units
constexpr uint32_t kMaxImage = 1024;   // input height, width, channels

// A value as a message shows it: scalars as written, containers by size (dumping a nested
// value would recurse as deep as the file nests).
std::string describe(const Json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// One layer's arguments, read with the layer named in every message.
class Args {
 public:
  Args(const std::string& source, size_t index, const std::string& cls, const Json& obj)
      : where_(source + ": layers[" + std::to_string(index) + "] (" + cls + ")"), obj_(obj) {}

  [[noreturn]] void fail(const std::string& why) const { throw ModelFileError(where_ + ": " + why); }
  bool has(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }

  uint32_t integer(const char* key, uint32_t lo, uint32_t hi) const {
    const Json& v = obj_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail("'" + std::string(key) + "' must be an integer from " + std::to_string(lo) + " to " +
           std::to_string(hi) + ", not " + describe(v));
    return static_cast<uint32_t>(v.get<int64_t>());
  }
  // An int, or a pair of equal ints (Keras's (k, k)): the chip's windows are square.
  uint32_t square(const char* key, uint32_t lo, uint32_t hi) const {
    const Json& v = obj_.at(key);
    if (v.is_array()) {
      if (v.size() != 2 || !v[0].is_number_integer() || v[0] != v[1])
        fail("'" + std::string(key) + "' must be an integer or a pair of equal integers, not " +
             describe(v));
      Json one = v[0];
      Json tmp = Json::object();
      tmp[key] = one;
      return Args(*this, tmp).integer(key, lo, hi);
    }
    return integer(key, lo, hi);
  }
  std::string choice(const char* key, std::initializer_list<const char*> allowed) const {
    const Json& v = obj_.at(key);
    std::string list;
    for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
    if (v.is_string())
      for (const char* a : allowed)
        if (v.get<std::string>() == a) return a;
    fail("'" + std::string(key) + "' must be one of " + list + ", not " + describe(v));
  }
  // Keras's activation names; "linear" and null are no activation ("").
  std::string activation(std::initializer_list<const char*> allowed) const {
    if (!obj_.contains("activation") || obj_.at("activation").is_null()) return "";
    const std::string a = choice("activation", allowed);
    return a == "linear" ? "" : a;
  }
  void only(std::initializer_list<const char*> keys) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      bool known = it.key() == "class_name" || it.key() == "name" || it.key() == "config";
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
        fail("unknown argument '" + it.key() + "' (this layer takes: " +
             (list.empty() ? std::string("none") : list) + ")");
      }
    }
  }
  void bias_required() const {
    if (has("use_bias") && obj_.at("use_bias") != Json(true))
      fail("'use_bias' must be true (every layer of the chip has a bias), not " +
           describe(obj_.at("use_bias")));
  }
  const std::string& where() const { return where_; }

 private:
  Args(const Args& base, const Json& obj) : where_(base.where_), obj_(obj) {}
  std::string where_;
  const Json& obj_;
};

// Where the layers' shapes stand: an image (h, w, c) or, after Flatten, a vector of h values.
struct Shape {
  bool flat = false;
  uint32_t h = 0, w = 0, c = 0;
  std::string str() const {
    return flat ? "(" + std::to_string(h) + ")"
                : "(" + std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(c) +
                      ")";
  }
};

std::array<uint32_t, 3> read_input_shape(const Json& v, const std::string& where) {
  if (!v.is_array() || v.size() != 3)
    throw ModelFileError(where + ": 'input_shape' must be [height, width, channels], not " +
                         describe(v));
  std::array<uint32_t, 3> s{};
  for (int i = 0; i < 3; ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() < 1 || v[i].get<int64_t>() > kMaxImage)
      throw ModelFileError(where + ": 'input_shape' entries must be integers from 1 to " +
                           std::to_string(kMaxImage) + ", not " + describe(v));
    s[i] = static_cast<uint32_t>(v[i].get<int64_t>());
  }
  return s;
}

// The output side of a window of `k` with stride `s` over `n` (Keras's padding rules).
uint32_t window_out(uint32_t n, uint32_t k, uint32_t s, bool same) {
  return same ? (n + s - 1) / s : (n - k) / s + 1;
}

Layer parse_layer(const std::string& source, size_t index, const Json& entry, Shape& shape,
                  bool first, std::array<uint32_t, 3>* input_shape) {
  const std::string at = source + ": layers[" + std::to_string(index) + "]";
  if (!entry.is_object()) throw ModelFileError(at + ": must be an object, not " + describe(entry));
  if (!entry.contains("class_name") || !entry.at("class_name").is_string())
    throw ModelFileError(at + ": needs \"class_name\" (Normalization, Conv2D, MaxPool2D, "
                              "AveragePool2D, Flatten, Dense or Dropout)");
  const std::string cls = entry.at("class_name").get<std::string>();
  // Arguments inline, or Keras's to_json form {"class_name": ..., "config": {...}}.
  const Json* argsp = &entry;
  if (entry.contains("config")) {
    if (!entry.at("config").is_object())
      throw ModelFileError(at + " (" + cls + "): 'config' must be an object");
    if (entry.size() > 2 + (entry.contains("name") ? 1 : 0))
      throw ModelFileError(at + " (" + cls + "): arguments go either in 'config' or beside "
                                "class_name, not both");
    argsp = &entry.at("config");
  }
  const Args a(source, index, cls, *argsp);
  if (entry.contains("name") && !entry.at("name").is_string()) a.fail("'name' must be a string");
  if (argsp->contains("name") && !argsp->at("name").is_string()) a.fail("'name' must be a string");

  const bool image_layer = cls == "Conv2D" || cls == "MaxPool2D" || cls == "MaxPooling2D" ||
                           cls == "AveragePool2D" || cls == "AveragePooling2D";
  if (a.has("input_shape")) {
    if (!first) a.fail("'input_shape' belongs on the first layer only");
    if (input_shape->at(0) != 0) a.fail("'input_shape' is given twice (model and first layer)");
    *input_shape = read_input_shape(argsp->at("input_shape"), a.where());
    shape = {false, (*input_shape)[0], (*input_shape)[1], (*input_shape)[2]};
  }
  if (first && shape.h == 0)
    a.fail("the model needs 'input_shape' ([height, width, channels]), on the model or here");
  if (image_layer && shape.flat)
    a.fail("needs an image input (height, width, channels), but its input is " + shape.str() +
           " (after a Flatten)");

  Layer l{Layer::Kind::kFlatten};
  if (cls == "Conv2D") {
    a.only({"filters", "kernel_size", "strides", "padding", "activation", "use_bias",
            "input_shape"});
    if (!a.has("filters")) a.fail("needs 'filters'");
    if (!a.has("kernel_size")) a.fail("needs 'kernel_size'");
    const uint32_t f = a.integer("filters", 1, kMaxUnits);
    const uint32_t k = a.square("kernel_size", 1, 7);
    const uint32_t s = a.has("strides") ? a.square("strides", 1, 2) : 1;
    const std::string pad = a.has("padding") ? a.choice("padding", {"valid", "same"}) : "valid";
    a.bias_required();
    l = Conv2D(f, k, a.activation({"relu", "linear"}), {}, pad, s);
    if (pad == "valid" && (shape.h < k || shape.w < k))
      a.fail("a " + std::to_string(k) + "x" + std::to_string(k) + " kernel does not fit its " +
             shape.str() + " input with padding valid");
    shape = {false, window_out(shape.h, k, s, pad == "same"), window_out(shape.w, k, s, pad == "same"),
             f};
  } else if (image_layer) {  // the pools
    a.only({"pool_size", "strides", "padding", "input_shape"});
    const uint32_t p = a.has("pool_size") ? a.square("pool_size", 2, 3) : 2;
    const uint32_t s = a.has("strides") ? a.square("strides", 2, 3) : p;
    if (a.has("padding")) a.choice("padding", {"valid"});
    const bool avg = cls == "AveragePool2D" || cls == "AveragePooling2D";
    l = avg ? AveragePool2D(p, s) : MaxPool2D(p, s);
    if (shape.h < p || shape.w < p)
      a.fail("a " + std::to_string(p) + "x" + std::to_string(p) + " pool does not fit its " +
             shape.str() + " input");
    shape = {false, window_out(shape.h, p, s, false), window_out(shape.w, p, s, false), shape.c};
  } else if (cls == "Flatten") {
    a.only({"input_shape"});
    l = Flatten();
    if (!shape.flat) shape = {true, shape.h * shape.w * shape.c, 0, 0};
  } else if (cls == "Dense") {
    a.only({"units", "activation", "use_bias", "input_shape"});
    if (!a.has("units")) a.fail("needs 'units'");
    if (!shape.flat)
      a.fail("needs a flat input, but its input is " + shape.str() + ": add a Flatten before it");
    const uint32_t u = a.integer("units", 1, kMaxUnits);
    a.bias_required();
    l = Dense(u, a.activation({"relu", "softmax", "linear"}));
    shape = {true, u, 0, 0};
  } else if (cls == "Dropout") {
    a.only({"rate", "seed", "input_shape"});
    if (!a.has("rate")) a.fail("needs 'rate'");
    const Json& r = argsp->at("rate");
    if (!r.is_number() || !(r.get<double>() >= 0.0) || !(r.get<double>() < 1.0))
      a.fail("'rate' must be a number from 0 up to (not including) 1, not " + describe(r));
    uint64_t seed = 0;
    if (a.has("seed")) {
      const Json& v = argsp->at("seed");
      if (!v.is_number_unsigned()) a.fail("'seed' must be a non-negative integer, not " + describe(v));
      seed = v.get<uint64_t>();
    }
    l = Dropout(static_cast<float>(r.get<double>()), seed);
  } else if (cls == "Normalization") {
    a.only({"mean", "variance", "axis", "input_shape"});
    if (!first) a.fail("only as the first layer: the host normalizes the images before they reach "
                       "the chip");
    if (!a.has("mean")) a.fail("needs 'mean' (adapt() is not run here: give the statistics)");
    if (!a.has("variance")) a.fail("needs 'variance'");
    if (a.has("axis")) {
      const Json& ax = argsp->at("axis");
      if (!(ax.is_number_integer() && ax.get<int64_t>() == -1))
        a.fail("'axis' must be -1 (one channel: scalar statistics), not " + describe(ax));
    }
    // a number, or Keras's one-element list for one channel
    auto stat = [&](const char* key) {
      const Json* v = &argsp->at(key);
      if (v->is_array() && v->size() == 1) v = &v->at(0);
      if (!v->is_number() || !std::isfinite(v->get<double>()))
        a.fail(std::string("'") + key + "' must be a finite number, not " + describe(argsp->at(key)));
      return v->get<double>();
    };
    const double mean = stat("mean"), variance = stat("variance");
    if (!(variance > 0)) a.fail("'variance' must be above 0, not " + describe(argsp->at("variance")));
    if (shape.flat || shape.c != 1)
      a.fail("takes the images (one channel), not " + shape.str());
    l = Normalization(static_cast<float>(mean), static_cast<float>(variance));
  } else {
    a.fail("unknown layer class (known: Normalization, Conv2D, MaxPool2D, AveragePool2D, "
           "Flatten, Dense, Dropout)");
  }
  return l;
}

}  // namespace

ModelDescription parse_model_description(std::string_view text, const std::string& source) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte: 1-based offset of the character where parsing failed.
    size_t line = 1, col = 1;
    const size_t end = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw ModelFileError(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                         ": not JSON: " + what);
  } catch (const Json::exception& e) {
    // A number beyond a double (out_of_range 406: "number overflow parsing '1e999'"; found by
    // fuzz_model): the JSON reader names the number, not its place.
    std::string what = e.what();
    const size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    throw ModelFileError(source + ": not JSON: " + what);
  }
  if (!doc.is_object())
    throw ModelFileError(source + ": the model must be a JSON object with \"layers\"");
  ModelDescription m;
  std::array<uint32_t, 3> input{};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    if (k == "name") {
      if (!it.value().is_string()) throw ModelFileError(source + ": 'name' must be a string");
      m.name = it.value().get<std::string>();
    } else if (k == "class_name") {
      if (it.value() != Json("Sequential"))
        throw ModelFileError(source + ": 'class_name' must be \"Sequential\", not " +
                             describe(it.value()));
    } else if (k == "input_shape") {
      input = read_input_shape(it.value(), source);
    } else if (k != "layers") {
      throw ModelFileError(source + ": unknown key '" + k +
                           "' (a model has name, class_name, input_shape and layers)");
    }
  }
  if (!doc.contains("layers") || !doc.at("layers").is_array() || doc.at("layers").empty())
    throw ModelFileError(source + ": needs \"layers\", a non-empty list of layers");
  const Json& layers = doc.at("layers");
  if (layers.size() > 64) throw ModelFileError(source + ": more than 64 layers");
  Shape shape;
  if (input[0]) shape = {false, input[0], input[1], input[2]};
  for (size_t i = 0; i < layers.size(); ++i)
    m.layers.push_back(parse_layer(source, i, layers[i], shape, i == 0, &input));
  if (m.layers.back().kind != Layer::Kind::kDense)
    throw ModelFileError(source + ": layers[" + std::to_string(m.layers.size() - 1) + "] (" +
                         kind_name(m.layers.back().kind) +
                         "): the last layer must be the Dense layer that gives the classes");
  m.layers.front().input_shape = input;
  return m;
}

ModelDescription load_model_description(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ModelFileError(path + ": cannot open the model file");
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) throw ModelFileError(path + ": read error");
  return parse_model_description(text.str(), path);
}

std::string model_description_json(const ModelDescription& m) {
  Json doc = Json::object();
  if (!m.name.empty()) doc["name"] = m.name;
  if (!m.layers.empty()) {
    const auto& in = m.layers.front().input_shape;
    doc["input_shape"] = {in[0], in[1], in[2]};
  }
  Json layers = Json::array();
  for (const Layer& l : m.layers) {
    Json j = Json::object();
    j["class_name"] = kind_name(l.kind);
    switch (l.kind) {
      case Layer::Kind::kConv2D:
        j["filters"] = l.units;
        j["kernel_size"] = l.size;
        j["strides"] = l.stride();
        j["padding"] = l.padding;
        j["activation"] = l.activation.empty() ? "linear" : l.activation;
        break;
      case Layer::Kind::kMaxPool2D:
      case Layer::Kind::kAveragePool2D:
        j["pool_size"] = l.size;
        j["strides"] = l.stride();
        break;
      case Layer::Kind::kFlatten:
        break;
      case Layer::Kind::kDense:
        j["units"] = l.units;
        j["activation"] = l.activation.empty() ? "linear" : l.activation;
        break;
      case Layer::Kind::kDropout:
        j["rate"] = static_cast<double>(l.rate);
        j["seed"] = l.seed;
        break;
      case Layer::Kind::kNormalization:
        j["mean"] = static_cast<double>(l.mean);
        j["variance"] = static_cast<double>(l.variance);
        break;
    }
    layers.push_back(std::move(j));
  }
  doc["layers"] = std::move(layers);
  std::string out = doc.dump(2);
  out += "\n";
  return out;
}

ModelDescription example_cnn() {
  return {"example_cnn",
          {Conv2D(32, 3, "relu", {28, 28, 1}), MaxPool2D(2), Flatten(), Dense(10, "softmax")}};
}

}  // namespace tessera::keras
