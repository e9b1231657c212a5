// keras::Layer: the layer constructors and what the chip compiler lowers today
// (tessera/keras.h). Apart from Sequential so that the model-file parser and its fuzz target
// need no device.
#include <cmath>
#include <stdexcept>
#include <string>

#include "tessera/dense_step.h"
#include "tessera/keras.h"

#include <cmath>

namespace tessera::keras {

const char* kind_name(Layer::Kind k) {
  switch (k) {
    case Layer::Kind::kConv2D:
      return "Conv2D";
    case Layer::Kind::kMaxPool2D:
      return "MaxPool2D";
    case Layer::Kind::kAveragePool2D:
      return "AveragePool2D";
    case Layer::Kind::kFlatten:
      return "Flatten";
    case Layer::Kind::kDense:
      return "Dense";
    case Layer::Kind::kDropout:
      return "Dropout";
    case Layer::Kind::kNormalization:
      return "Normalization";
  }
  return "?";
}

bool Layer::operator==(const Layer& o) const {
  return kind == o.kind && units == o.units && size == o.size && stride() == o.stride() &&
         activation == o.activation && padding == o.padding && rate == o.rate && seed == o.seed &&
         mean == o.mean && variance == o.variance && input_shape == o.input_shape;
}

Layer Conv2D(uint32_t filters, uint32_t kernel_size, const std::string& activation,
             std::array<uint32_t, 3> input_shape, const std::string& padding, uint32_t strides) {
  Layer l{Layer::Kind::kConv2D};
  l.units = filters;
  l.size = kernel_size;
  l.strides = strides;
  l.activation = activation;
  l.input_shape = input_shape;
  l.padding = padding;
  return l;
}
Layer MaxPool2D(uint32_t pool_size, uint32_t strides) {
  Layer l{Layer::Kind::kMaxPool2D};
  l.size = pool_size;
  l.strides = strides;
  return l;
}
Layer AveragePool2D(uint32_t pool_size, uint32_t strides) {
  Layer l{Layer::Kind::kAveragePool2D};
  l.size = pool_size;
  l.strides = strides;
  return l;
}
Layer Flatten() { return Layer{Layer::Kind::kFlatten}; }

Layer Normalization(float mean, float variance, std::array<uint32_t, 3> input_shape) {
  Layer l{Layer::Kind::kNormalization};
  l.mean = mean;
  l.variance = variance;
  l.input_shape = input_shape;
  return l;
}
Layer Dense(uint32_t units, const std::string& activation) {
  Layer l{Layer::Kind::kDense};
  l.units = units;
  l.activation = activation;
  return l;
}
Layer Dropout(float rate, uint64_t seed) {
  Layer l{Layer::Kind::kDropout};
  l.rate = rate;
  l.seed = seed;
  return l;
}

compiler::OptimizerSpec Adam::spec() const {
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerSpec::Kind::kAdam;
  o.lr = learning_rate;
  o.beta1 = beta_1;
  o.beta2 = beta_2;
  o.epsilon = epsilon;
  return o;
}

compiler::OptimizerSpec SGD::spec() const {
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerSpec::Kind::kSgd;
  o.lr = learning_rate;
  o.momentum = momentum;
  return o;
}

compiler::DenseStackSpec dense_stack_spec(const std::vector<Layer>& layers) {
  auto bad = [](const std::string& why) { throw std::invalid_argument("compile: " + why); };
  using FK = compiler::FeatureLayerSpec::Kind;
  if (layers.empty()) bad("the model has no layers");
  const auto in = layers.front().input_shape;
  if (in[0] == 0 || in[1] == 0 || in[2] == 0)
    bad("layer 0 (" + std::string(kind_name(layers.front().kind)) + ") needs input_shape");
  compiler::DenseStackSpec spec;
  spec.input_shape = {in[0], in[1], in[2]};
  size_t i = 0;
  if (layers[0].kind == Layer::Kind::kNormalization) {  // preprocessing: the host applies it
    if (!(layers[0].variance > 0) || !std::isfinite(layers[0].variance) ||
        !std::isfinite(layers[0].mean))
      bad("layer 0 (Normalization): mean and variance must be finite, variance > 0");
    spec.norm = {true, layers[0].mean, layers[0].variance};
    i = 1;
  }
  for (size_t j = i; j < layers.size(); ++j)
    if (layers[j].kind == Layer::Kind::kNormalization)
      bad("layer " + std::to_string(j) + " (Normalization): only as the first layer (the host "
          "normalizes the images before they reach the chip)");
  // the layers before Flatten
  for (; i < layers.size() && layers[i].kind != Layer::Kind::kFlatten; ++i) {
    const Layer& l = layers[i];
    const std::string at = "layer " + std::to_string(i) + " (" + kind_name(l.kind) + ")";
    compiler::FeatureLayerSpec f;
    if (l.kind == Layer::Kind::kConv2D) {
      f.kind = FK::kConv;
      f.filters = l.units;
      f.kernel = l.size;
      f.stride = l.stride();
      if (l.padding != "valid" && l.padding != "same")
        bad(at + ": padding must be valid or same, not '" + l.padding + "'");
      f.same = l.padding == "same";
      if (l.activation != "relu" && l.activation != "" && l.activation != "linear")
        bad(at + ": activation must be relu or linear, not '" + l.activation + "'");
      f.relu = l.activation == "relu";
      if (f.kernel < 1 || f.kernel > 7)
        bad(at + ": kernel_size " + std::to_string(f.kernel) + ": 1 to 7 are lowered");
      if (f.stride != 1 && f.stride != 2)
        bad(at + ": strides " + std::to_string(f.stride) + ": 1 or 2 are lowered");
    } else if (l.kind == Layer::Kind::kMaxPool2D || l.kind == Layer::Kind::kAveragePool2D) {
      f.kind = l.kind == Layer::Kind::kMaxPool2D ? FK::kMaxPool : FK::kAvgPool;
      f.pool = l.size;
      if (f.pool != 2 && f.pool != 3)
        bad(at + ": pool_size " + std::to_string(f.pool) + ": 2 or 3 are lowered");
      if (l.stride() != l.size)
        bad(at + ": strides must equal pool_size (" + std::to_string(l.size) + "), not " +
            std::to_string(l.stride()));
    } else {
      bad(at + ": before Flatten only Conv2D, MaxPool2D and AveragePooling2D are lowered "
               "(docs/compiler.md, \"Supported ops\")");
    }
    spec.features.push_back(f);
  }
  if (i == layers.size()) bad("the model has no Flatten (a Dense layer follows Flatten)");
  try {
    spec.inputs = static_cast<uint32_t>(compiler::feature_shapes(spec).back().size());
  } catch (const std::invalid_argument& e) {
    bad(e.what());  // "layer i" counts from 1 among the layers before Flatten: from 0 here too
  }
  if (spec.features.empty()) spec.inputs = in[0] * in[1] * in[2];
  const size_t flatten = i;
  for (++i; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const std::string at = "layer " + std::to_string(i) + " (" + kind_name(l.kind) + ")";
    if (l.kind == Layer::Kind::kDropout) {
      const bool after_relu = !spec.layers.empty() && spec.layers.back().relu &&
                              layers[i - 1].kind == Layer::Kind::kDense;
      if (!after_relu || i + 1 == layers.size())
        bad(at + ": Dropout is lowered after a hidden relu Dense layer only (docs/compiler.md, "
            "\"Supported ops\")");
      if (!(l.rate > 0)) continue;  // rate 0: the identity
      spec.layers.back().dropout = l.rate;
      spec.layers.back().dropout_seed = static_cast<uint32_t>(l.seed ^ (l.seed >> 32));
      continue;
    }
    if (l.kind != Layer::Kind::kDense)
      bad(at + ": after Flatten only Dense and Dropout layers are lowered (docs/compiler.md)");
    const bool last = i + 1 == layers.size();
    if (last && l.activation != "softmax")
      bad(at + ": the last Dense layer's activation must be softmax, not '" + l.activation + "'");
    if (!last && l.activation != "relu" && l.activation != "" && l.activation != "linear")
      bad(at + ": activation must be relu or linear, not '" + l.activation + "'");
    spec.layers.push_back({l.units, l.activation == "relu"});
  }
  (void)flatten;
  if (spec.layers.empty()) bad("the model has no Dense layer after Flatten");
  return spec;
}

}  // namespace tessera::keras
