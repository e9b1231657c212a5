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

// A short array of scalars as written ([2, 2]), anything else as describe().
std::string show(const Json& v) {
  if (v.is_array() && v.size() <= 4) {
    bool scalars = true;
    for (const Json& e : v) scalars = scalars && !e.is_structured();
    if (scalars) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + describe(v[i]);
      return s + "]";
    }
  }
  return describe(v);
}

// A Keras object ({"class_name": "L2", "config": {...}}) by its class, with the name in its
// config if it has one (a dtype policy: DTypePolicy(mixed_float16)); anything else as describe().
std::string describe_keras(const Json& v) {
  if (!v.is_object() || !v.contains("class_name") || !v.at("class_name").is_string())
    return show(v);
  std::string s = v.at("class_name").get<std::string>();
  if (v.contains("config") && v.at("config").is_object() && v.at("config").contains("name") &&
      v.at("config").at("name").is_string())
    s += "(" + v.at("config").at("name").get<std::string>() + ")";
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A list of names for messages: "a, b, c".
std::string join(std::initializer_list<const char*> names) {
  std::string list;
  for (const char* n : names) list += std::string(list.empty() ? "" : ", ") + n;
  return list;
}

constexpr const char* kFloat32Only =
    "'dtype' must be float32 (tessera has one precision: fp32 weights and sums, bf16 MXU "
    "operands), not ";

// Keras's dtype (a string, Keras 2's Policy or Keras 3's DTypePolicy object, or null for the
// default): tessera's one precision is Keras's float32 (fp32 weights, activations and sums; the
// MXU rounds its operands to bf16, docs/numerics.md), not a mixed or half-precision policy.
// Returns "" if it is float32, else the value as a message shows it.
std::string not_float32(const Json& v) {
  if (v.is_null() || v == Json("float32")) return "";
  if (v.is_object() && v.contains("class_name") && v.contains("config")) {
    const Json& c = v.at("class_name");
    const Json& cfg = v.at("config");
    if ((c == Json("DTypePolicy") || c == Json("FloatDTypePolicy") || c == Json("Policy")) &&
        cfg.is_object() && cfg.contains("name") && cfg.at("name") == Json("float32"))
      return "";
  }
  return describe_keras(v);
}

// Keras 3's envelope of a serialized object: "module" names where Keras keeps the class and
// "registered_name" is null (or the class name) for Keras's own classes; anything else is a
// class from another package or a custom registration, which the chip does not know.
// Returns "" if `obj` is Keras's own, else why not.
std::string not_keras_own(const Json& obj, const std::string& cls) {
  if (obj.contains("module")) {
    const Json& m = obj.at("module");
    if (!m.is_string() || m.get<std::string>().rfind("keras", 0) != 0)
      return "'module' must be one of Keras's (keras, keras.layers, ...), not " + describe(m);
  }
  if (obj.contains("registered_name")) {
    const Json& r = obj.at("registered_name");
    if (!r.is_null() && r != Json(cls))
      return "'registered_name' must be null (a Keras class, not a custom registered one), not " +
             describe(r);
  }
  return "";
}

// One layer's arguments, read with the layer named in every message.
class Args {
 public:
  Args(const std::string& source, size_t index, const std::string& cls, const Json& obj)
      : where_(source + ": layers[" + std::to_string(index) + "] (" + cls + ")"), obj_(obj) {}

  [[noreturn]] void fail(const std::string& why) const { throw ModelFileError(where_ + ": " + why); }
  bool has(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const Json& at(const char* key) const { return obj_.at(key); }

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
             show(v));
      Json one = v[0];
      Json tmp = Json::object();
      tmp[key] = one;
      return Args(*this, tmp).integer(key, lo, hi);
    }
    return integer(key, lo, hi);
  }
  std::string choice(const char* key, std::initializer_list<const char*> allowed) const {
    const Json& v = obj_.at(key);
    if (v.is_string())
      for (const char* a : allowed)
        if (v.get<std::string>() == a) return a;
    fail("'" + std::string(key) + "' must be one of " + join(allowed) + ", not " + describe(v));
  }
  // Keras's activation names; "linear" and null are no activation ("").
  std::string activation(std::initializer_list<const char*> allowed) const {
    if (!obj_.contains("activation") || obj_.at("activation").is_null()) return "";
    const std::string a = choice("activation", allowed);
    return a == "linear" ? "" : a;
  }
  // The arguments this layer takes: `own` (the project's form, named in the message) and
  // `keras` (what Keras's to_json writes besides), beside the envelope keys and the arguments
  // of every layer (kCommon).
  void only(std::initializer_list<const char*> own,
            std::initializer_list<const char*> keras = {}) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      bool known = false;
      for (const char* k : kEnvelope) known = known || it.key() == k;
      for (const char* k : kCommon) known = known || it.key() == k;
      for (const char* k : own) known = known || it.key() == k;
      for (const char* k : keras) known = known || it.key() == k;
      if (!known)
        fail("unknown argument '" + it.key() + "' (this layer takes: " +
             (own.size() == 0 ? std::string("none") : join(own)) +
             ", and the Keras to_json arguments of docs/training.md)");
    }
  }
  void bias_required() const {
    if (has("use_bias") && obj_.at("use_bias") != Json(true))
      fail("'use_bias' must be true (every layer of the chip has a bias), not " +
           describe(obj_.at("use_bias")));
  }
  // An argument Keras writes as null when it is not used; any value is refused with `why`.
  void null_only(const char* key, const char* why) const {
    if (has(key))
      fail("'" + std::string(key) + "' must be null (" + why + "), not " +
           describe_keras(obj_.at(key)));
  }
  // The arguments of every layer: Keras's dtype, trainable and activity_regularizer.
  void common() const {
    if (obj_.contains("dtype")) {
      const std::string d = not_float32(obj_.at("dtype"));
      if (!d.empty()) fail(std::string(kFloat32Only) + d);
    }
    if (obj_.contains("trainable") && !obj_.at("trainable").is_boolean())
      fail("'trainable' must be true or false, not " + describe(obj_.at("trainable")));
    null_only("activity_regularizer", "the chip's loss has no activity penalty");
  }
  // The arguments of a layer with weights (Conv2D, Dense), as Keras writes them: trainable,
  // Glorot-uniform kernel and zero bias (tessera's initialization), no regularizer, constraint
  // or LoRA.
  void weights() const {
    if (obj_.contains("trainable") && obj_.at("trainable") != Json(true))
      fail("'trainable' must be true (the chip trains every layer's weights), not " +
           describe(obj_.at("trainable")));
    initializer("kernel_initializer", true);
    initializer("bias_initializer", false);
    null_only("kernel_regularizer", "the chip's training step adds no weight penalty");
    null_only("bias_regularizer", "the chip's training step adds no weight penalty");
    null_only("kernel_constraint", "the chip's update applies no constraint");
    null_only("bias_constraint", "the chip's update applies no constraint");
    null_only("lora_rank", "the chip trains the whole kernel, not a low-rank update");
    null_only("lora_alpha", "the chip trains the whole kernel, not a low-rank update");
  }
  // Keras's data_format: the chip's images are (height, width, channels).
  void channels_last() const {
    if (obj_.contains("data_format") && obj_.at("data_format") != Json("channels_last"))
      fail("'data_format' must be channels_last (the images are height x width x channels), "
           "not " + describe(obj_.at("data_format")));
  }
  // The initializers tessera uses (compiler::glorot_init): a kernel is Glorot uniform
  // (GlorotUniform; older Keras writes it as VarianceScaling with scale 1, mode fan_avg,
  // distribution uniform), a bias zeros; either unseeded (the weights come from tessera's
  // --seed).
  void initializer(const char* key, bool kernel) const {
    if (!obj_.contains(key)) return;  // Keras's default: the same
    const Json& v = obj_.at(key);
    const std::string want = kernel ? "GlorotUniform" : "Zeros";
    const std::string why =
        std::string("'") + key + "' must be " + want + " (the chip's initial " +
        (kernel ? "kernels are Glorot uniform" : "biases are zeros") + "), not ";
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == want || s == (kernel ? "glorot_uniform" : "zeros")) return;
      fail(why + describe(v));
    }
    if (!v.is_object() || !v.contains("class_name") || !v.at("class_name").is_string())
      fail(why + describe(v));
    const std::string cls = v.at("class_name").get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key() != "class_name" && it.key() != "config" && it.key() != "module" &&
          it.key() != "registered_name")
        fail(why + "an object with '" + it.key() + "'");
    const std::string foreign = not_keras_own(v, cls);
    if (!foreign.empty()) fail(std::string("'") + key + "': " + foreign);
    const Json cfg = v.contains("config") ? v.at("config") : Json::object();
    if (!cfg.is_object()) fail(why + describe_keras(v));
    auto cfg_is = [&](const char* k, const Json& value) {
      return cfg.contains(k) && cfg.at(k) == value;
    };
    bool ok = false;
    size_t args = 0;  // the config entries the class takes
    if (kernel && cls == "GlorotUniform") {
      ok = true;
    } else if (kernel && cls == "VarianceScaling") {
      ok = cfg_is("scale", Json(1.0)) && cfg_is("mode", Json("fan_avg")) &&
           cfg_is("distribution", Json("uniform"));
      args = 3;
    } else if (!kernel && cls == "Zeros") {
      ok = true;
    }
    if (!ok) fail(why + describe_keras(v));
    if (cfg.contains("seed") && !cfg.at("seed").is_null())
      fail(std::string("'") + key + "' has the seed " + describe(cfg.at("seed")) +
           ": the chip's initial weights come from tessera's --seed, so it must be null");
    if (cfg.size() - (cfg.contains("seed") ? 1 : 0) != args) {
      for (auto it = cfg.begin(); it != cfg.end(); ++it)
        if (it.key() != "seed" && it.key() != "scale" && it.key() != "mode" &&
            it.key() != "distribution")
          fail(std::string("'") + key + "': unknown " + cls + " argument '" + it.key() + "'");
      fail(why + describe_keras(v));
    }
  }
  const std::string& where() const { return where_; }

 private:
  static constexpr const char* kEnvelope[] = {"class_name", "name", "config", "module",
                                              "registered_name", "build_config"};
  static constexpr const char* kCommon[] = {"trainable", "dtype", "batch_input_shape",
                                            "activity_regularizer", "input_shape"};
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

using Hwc = std::array<uint32_t, 3>;
std::string hwc_str(const Hwc& s) {
  return "(" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) +
         ")";
}

// The model's input shape and where it was given (for messages).
struct Input {
  Hwc s{};
  std::string from;
  bool set() const { return s[0] != 0; }
};

Hwc read_input_shape(const Json& v, const std::string& where,
                     const std::string& key = "input_shape") {
  if (!v.is_array() || v.size() != 3)
    throw ModelFileError(where + ": '" + key + "' must be [height, width, channels], not " +
                         show(v));
  Hwc s{};
  for (int i = 0; i < 3; ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() < 1 || v[i].get<int64_t>() > kMaxImage)
      throw ModelFileError(where + ": '" + key + "' entries must be integers from 1 to " +
                           std::to_string(kMaxImage) + ", not " + show(v));
    s[i] = static_cast<uint32_t>(v[i].get<int64_t>());
  }
  return s;
}

// Keras's shape with the batch first: [null, height, width, channels].
Hwc read_batch_shape(const Json& v, const std::string& where, const std::string& key) {
  if (!v.is_array() || v.size() != 4)
    throw ModelFileError(where + ": '" + key + "' must be [null, height, width, channels], not " +
                         show(v));
  if (!v[0].is_null())
    throw ModelFileError(where + ": '" + key + "' must leave the batch size null (tessera's "
                                               "--batch sets it), not " + describe(v[0]));
  return read_input_shape(Json::array({v[1], v[2], v[3]}), where, key);
}

// A further statement of the input shape: the first sets it, the others must agree.
void merge_input(Input& in, Shape& shape, const Hwc& s, const std::string& where,
                 const std::string& key, const std::string& from) {
  if (!in.set()) {
    in.s = s;
    in.from = from;
    shape = {false, s[0], s[1], s[2]};
    return;
  }
  if (in.s != s)
    throw ModelFileError(where + ": '" + key + "' " + hwc_str(s) + " disagrees with the input "
                         "shape " + hwc_str(in.s) + " of " + in.from);
}

// The output side of a window of `k` with stride `s` over `n` (Keras's padding rules).
uint32_t window_out(uint32_t n, uint32_t k, uint32_t s, bool same) {
  return same ? (n + s - 1) / s : (n - k) / s + 1;
}

// Keras 3's "build_config": {"input_shape": [null, ...]}, the shape the layer was built for;
// it must be the input the layers before it give.
void check_build_config(const Json& bc, const Shape& shape, const Args& a) {
  if (bc.is_null()) return;
  if (!bc.is_object()) a.fail("'build_config' must be an object, not " + describe(bc));
  for (auto it = bc.begin(); it != bc.end(); ++it)
    if (it.key() != "input_shape")
      a.fail("'build_config': unknown key '" + it.key() + "' (it takes input_shape)");
  if (!bc.contains("input_shape") || bc.at("input_shape").is_null()) return;
  const Json& v = bc.at("input_shape");
  Json want = Json::array({nullptr, shape.h});
  if (!shape.flat) want = Json::array({nullptr, shape.h, shape.w, shape.c});
  if (v != want)
    a.fail("'build_config' has the input_shape " + show(v) +
           ", but the layers before give this layer " + show(want));
}

// Keras's InputLayer (Keras 2: batch_input_shape; Keras 3: batch_shape): the input shape.
void parse_input_layer(const Args& a, const Json& args, bool first, Input& in, Shape& shape) {
  if (!first) a.fail("must be the first layer");
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string& k = it.key();
    if (k != "batch_shape" && k != "batch_input_shape" && k != "dtype" && k != "sparse" &&
        k != "ragged" && k != "optional" && k != "name" && k != "class_name" && k != "config" &&
        k != "module" && k != "registered_name")
      a.fail("unknown argument '" + k + "' (this layer takes: batch_shape or batch_input_shape, "
             "dtype, sparse, ragged, optional)");
  }
  if (args.contains("dtype")) {
    const std::string d = not_float32(args.at("dtype"));
    if (!d.empty()) a.fail("'dtype' must be float32 (the input is float32 images), not " + d);
  }
  for (const char* k : {"sparse", "ragged", "optional"})
    if (a.has(k) && args.at(k) != Json(false))
      a.fail("'" + std::string(k) + "' must be false (the input is a dense batch of images), not " +
             describe(args.at(k)));
  const bool keras3 = a.has("batch_shape"), keras2 = a.has("batch_input_shape");
  if (keras3 && keras2) a.fail("give 'batch_shape' or 'batch_input_shape', not both");
  if (!keras3 && !keras2) a.fail("needs 'batch_shape' ([null, height, width, channels])");
  const char* key = keras3 ? "batch_shape" : "batch_input_shape";
  merge_input(in, shape, read_batch_shape(args.at(key), a.where(), key), a.where(), key,
              "layers[0] (InputLayer)");
}

Layer parse_layer(const std::string& source, size_t index, const Json& entry, Shape& shape,
                  bool first, Input& input) {
  const std::string at = source + ": layers[" + std::to_string(index) + "]";
  if (!entry.is_object()) throw ModelFileError(at + ": must be an object, not " + describe(entry));
  if (!entry.contains("class_name") || !entry.at("class_name").is_string())
    throw ModelFileError(at + ": needs \"class_name\" (InputLayer, Normalization, Conv2D, "
                              "MaxPool2D, AveragePool2D, Flatten, Dense or Dropout)");
  const std::string cls = entry.at("class_name").get<std::string>();
  // Arguments inline, or Keras's to_json form {"class_name": ..., "config": {...}} with Keras
  // 3's module, registered_name and build_config beside.
  const Json* argsp = &entry;
  if (entry.contains("config")) {
    if (!entry.at("config").is_object())
      throw ModelFileError(at + " (" + cls + "): 'config' must be an object");
    for (auto it = entry.begin(); it != entry.end(); ++it)
      if (it.key() != "class_name" && it.key() != "config" && it.key() != "name" &&
          it.key() != "module" && it.key() != "registered_name" && it.key() != "build_config")
        throw ModelFileError(at + " (" + cls + "): arguments go either in 'config' or beside "
                                  "class_name, not both ('" + it.key() + "')");
    argsp = &entry.at("config");
  }
  const Args a(source, index, cls, *argsp);
  if (entry.contains("name") && !entry.at("name").is_string()) a.fail("'name' must be a string");
  if (argsp->contains("name") && !argsp->at("name").is_string()) a.fail("'name' must be a string");
  const std::string foreign = not_keras_own(entry, cls);
  if (!foreign.empty()) a.fail(foreign);

  if (cls == "InputLayer") {
    parse_input_layer(a, *argsp, first, input, shape);
    return Flatten();  // not a layer of the description
  }
  const bool image_layer = cls == "Conv2D" || cls == "MaxPool2D" || cls == "MaxPooling2D" ||
                           cls == "AveragePool2D" || cls == "AveragePooling2D" ||
                           cls == "AvgPool2D";
  if (!image_layer && cls != "Flatten" && cls != "Dense" && cls != "Dropout" &&
      cls != "Normalization")
    a.fail("unknown layer class (known: InputLayer, Normalization, Conv2D, MaxPool2D, "
           "MaxPooling2D, AveragePool2D, AveragePooling2D, AvgPool2D, Flatten, Dense, Dropout)");
  if (a.has("input_shape")) {
    if (!first) a.fail("'input_shape' belongs on the first layer only");
    if (input.set())
      a.fail("'input_shape' is given twice (" + input.from + " and the first layer)");
    merge_input(input, shape, read_input_shape(a.at("input_shape"), a.where()), a.where(),
                "input_shape", "the first layer");
  }
  // older Keras: the first layer's config carries the input as [null, height, width, channels]
  if (a.has("batch_input_shape")) {
    if (!first) a.fail("'batch_input_shape' belongs on the first layer only");
    merge_input(input, shape,
                read_batch_shape(a.at("batch_input_shape"), a.where(), "batch_input_shape"),
                a.where(), "batch_input_shape", "the first layer");
  }
  if (first && shape.h == 0)
    a.fail("the model needs 'input_shape' ([height, width, channels]), on the model or here");
  if (image_layer && shape.flat)
    a.fail("needs an image input (height, width, channels), but its input is " + shape.str() +
           " (after a Flatten)");
  a.common();
  if (entry.contains("build_config")) check_build_config(entry.at("build_config"), shape, a);

  Layer l = Flatten();
  if (cls == "Conv2D") {
    a.only({"filters", "kernel_size", "strides", "padding", "activation", "use_bias",
            "input_shape"},
           {"data_format", "dilation_rate", "groups", "kernel_initializer", "bias_initializer",
            "kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint",
            "lora_rank", "lora_alpha"});
    if (!a.has("filters")) a.fail("needs 'filters'");
    if (!a.has("kernel_size")) a.fail("needs 'kernel_size'");
    const uint32_t f = a.integer("filters", 1, kMaxUnits);
    const uint32_t k = a.square("kernel_size", 1, 7);
    const uint32_t s = a.has("strides") ? a.square("strides", 1, 2) : 1;
    const std::string pad = a.has("padding") ? a.choice("padding", {"valid", "same"}) : "valid";
    a.bias_required();
    a.channels_last();
    if (argsp->contains("dilation_rate") && a.at("dilation_rate") != Json(1) &&
        a.at("dilation_rate") != Json::array({1, 1}))
      a.fail("'dilation_rate' must be 1 or [1, 1] (the chip has no dilated convolution), not " +
             show(a.at("dilation_rate")));
    if (argsp->contains("groups") && a.at("groups") != Json(1))
      a.fail("'groups' must be 1 (the chip has no grouped convolution), not " +
             describe(a.at("groups")));
    a.weights();
    l = Conv2D(f, k, a.activation({"relu", "linear"}), {}, pad, s);
    if (pad == "valid" && (shape.h < k || shape.w < k))
      a.fail("a " + std::to_string(k) + "x" + std::to_string(k) + " kernel does not fit its " +
             shape.str() + " input with padding valid");
    shape = {false, window_out(shape.h, k, s, pad == "same"), window_out(shape.w, k, s, pad == "same"),
             f};
  } else if (image_layer) {  // the pools
    a.only({"pool_size", "strides", "padding", "input_shape"}, {"data_format"});
    const uint32_t p = a.has("pool_size") ? a.square("pool_size", 2, 3) : 2;
    const uint32_t s = a.has("strides") ? a.square("strides", 2, 3) : p;
    if (a.has("padding")) a.choice("padding", {"valid"});
    a.channels_last();
    const bool avg = cls == "AveragePool2D" || cls == "AveragePooling2D" || cls == "AvgPool2D";
    l = avg ? AveragePool2D(p, s) : MaxPool2D(p, s);
    if (shape.h < p || shape.w < p)
      a.fail("a " + std::to_string(p) + "x" + std::to_string(p) + " pool does not fit its " +
             shape.str() + " input");
    shape = {false, window_out(shape.h, p, s, false), window_out(shape.w, p, s, false), shape.c};
  } else if (cls == "Flatten") {
    a.only({"input_shape"}, {"data_format"});
    a.channels_last();
    l = Flatten();
    if (!shape.flat) shape = {true, shape.h * shape.w * shape.c, 0, 0};
  } else if (cls == "Dense") {
    a.only({"units", "activation", "use_bias", "input_shape"},
           {"kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
            "kernel_constraint", "bias_constraint", "lora_rank", "lora_alpha",
            "quantization_config"});
    if (!a.has("units")) a.fail("needs 'units'");
    if (!shape.flat)
      a.fail("needs a flat input, but its input is " + shape.str() + ": add a Flatten before it");
    const uint32_t u = a.integer("units", 1, kMaxUnits);
    a.bias_required();
    a.weights();
    a.null_only("quantization_config", "the chip trains the float32 kernel");
    l = Dense(u, a.activation({"relu", "softmax", "linear"}));
    shape = {true, u, 0, 0};
  } else if (cls == "Dropout") {
    a.only({"rate", "seed", "input_shape"}, {"noise_shape"});
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
    a.null_only("noise_shape", "the chip draws one mask bit per unit");
    l = Dropout(static_cast<float>(r.get<double>()), seed);
  } else {  // Normalization
    a.only({"mean", "variance", "axis", "input_shape"}, {"invert"});
    if (!first) a.fail("only as the first layer: the host normalizes the images before they reach "
                       "the chip");
    if (!a.has("mean")) a.fail("needs 'mean' (adapt() is not run here: give the statistics)");
    if (!a.has("variance")) a.fail("needs 'variance'");
    if (a.has("axis")) {
      // -1, or Keras's [-1] (it keeps the axes as a tuple), or [] (axis=None): one channel
      // either way, so scalar statistics
      const Json& ax = argsp->at("axis");
      if (!(ax == Json(-1) || ax == Json::array({-1}) || ax == Json::array()))
        a.fail("'axis' must be -1 (one channel: scalar statistics), not " + show(ax));
    }
    if (argsp->contains("invert") && a.at("invert") != Json(false))
      a.fail("'invert' must be false (the host normalizes the images, it does not undo a "
             "normalization), not " + describe(a.at("invert")));
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
  }
  return l;
}

// Keras's model.to_json(): {"class_name": "Sequential", "config": {"name": ..., "layers":
// [...], ...}, "keras_version": ..., "backend": ...} (Keras 3 adds module, registered_name,
// build_config and compile_config; Keras 2.1 and older write the layers as "config" itself).
// Returns the layers; sets the name and any input shape it gives.
const Json& read_keras_envelope(const Json& doc, const std::string& source, std::string& name,
                                Input& input, Shape& shape) {
  if (!doc.contains("class_name"))
    throw ModelFileError(source + ": a Keras model file needs \"class_name\": \"Sequential\"");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "class_name") {
      if (v != Json("Sequential"))
        throw ModelFileError(source + ": 'class_name' must be \"Sequential\", not " + describe(v) +
                             " (the chip trains a stack of layers)");
    } else if (k == "keras_version" || k == "backend") {
      if (!v.is_string()) throw ModelFileError(source + ": '" + k + "' must be a string");
    } else if (k == "module" || k == "registered_name") {
      const std::string foreign = not_keras_own(doc, "Sequential");
      if (!foreign.empty()) throw ModelFileError(source + ": " + foreign);
    } else if (k == "build_config") {
      if (v.is_null()) continue;
      if (!v.is_object())
        throw ModelFileError(source + ": 'build_config' must be an object, not " + describe(v));
      for (auto b = v.begin(); b != v.end(); ++b) {
        if (b.key() != "input_shape")
          throw ModelFileError(source + ": 'build_config': unknown key '" + b.key() + "'");
        if (!b.value().is_null())
          merge_input(input, shape,
                      read_batch_shape(b.value(), source + ": build_config", "input_shape"),
                      source, "build_config", "the model's 'build_config'");
      }
    } else if (k == "compile_config") {
      if (!v.is_null())
        throw ModelFileError(source + ": 'compile_config' must be null: the optimizer, loss and "
                                      "metrics are tessera train's options (--lr, ...), not the "
                                      "model file's (call to_json() before compile(), or delete "
                                      "the key)");
    } else if (k != "config") {
      throw ModelFileError(source + ": unknown key '" + k + "' (a Keras model has class_name, "
                           "config, keras_version and backend)");
    }
  }
  const Json& config = doc.at("config");
  if (config.is_array()) return config;  // Keras 2.1 and older: the layers themselves
  if (!config.is_object())
    throw ModelFileError(source + ": 'config' must be an object with \"layers\", not " +
                         describe(config));
  const std::string where = source + ": config";
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "name") {
      if (!v.is_string()) throw ModelFileError(where + ": 'name' must be a string");
      name = v.get<std::string>();
    } else if (k == "trainable") {
      if (v != Json(true))
        throw ModelFileError(where + ": 'trainable' must be true (the chip trains every layer), "
                             "not " + describe(v));
    } else if (k == "dtype") {
      const std::string d = not_float32(v);
      if (!d.empty())
        throw ModelFileError(where + ": " + kFloat32Only + d);
    } else if (k == "build_input_shape") {
      if (!v.is_null())
        merge_input(input, shape, read_batch_shape(v, where, "build_input_shape"), where,
                    "build_input_shape", "the model's 'build_input_shape'");
    } else if (k != "layers") {
      throw ModelFileError(where + ": unknown key '" + k + "' (a Sequential's config has name, "
                           "layers, trainable, dtype and build_input_shape)");
    }
  }
  if (!config.contains("layers"))
    throw ModelFileError(where + ": needs \"layers\", a non-empty list of layers");
  return config.at("layers");
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
  Input input;
  Shape shape;
  const Json* layersp = nullptr;
  if (doc.contains("config")) {  // Keras's to_json
    if (doc.contains("layers") || doc.contains("input_shape") || doc.contains("name"))
      throw ModelFileError(source + ": give the layers either in Keras's \"config\" or as "
                                    "\"layers\", not both");
    layersp = &read_keras_envelope(doc, source, m.name, input, shape);
  } else {
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
        merge_input(input, shape, read_input_shape(it.value(), source), source, "input_shape",
                    "the model");
      } else if (k != "layers") {
        throw ModelFileError(source + ": unknown key '" + k +
                             "' (a model has name, class_name, input_shape and layers)");
      }
    }
    if (doc.contains("layers")) layersp = &doc.at("layers");
  }
  if (!layersp || !layersp->is_array() || layersp->empty())
    throw ModelFileError(source + ": needs \"layers\", a non-empty list of layers");
  const Json& layers = *layersp;
  if (layers.size() > 64) throw ModelFileError(source + ": more than 64 layers");
  size_t last = 0;  // the file's index of the last layer of the description
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool input_layer = layers[i].is_object() && layers[i].contains("class_name") &&
                             layers[i].at("class_name") == Json("InputLayer");
    // an InputLayer comes first in the file; any other layer is first if none came before it
    const bool first = input_layer ? i == 0 : m.layers.empty();
    const Layer l = parse_layer(source, i, layers[i], shape, first, input);
    if (input_layer) continue;
    m.layers.push_back(l);
    last = i;
  }
  if (m.layers.empty())
    throw ModelFileError(source + ": needs a layer besides the InputLayer (the last a Dense)");
  if (m.layers.back().kind != Layer::Kind::kDense)
    throw ModelFileError(source + ": layers[" + std::to_string(last) + "] (" +
                         kind_name(m.layers.back().kind) +
                         "): the last layer must be the Dense layer that gives the classes");
  m.layers.front().input_shape = input.s;
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
