// The example CNN — Conv2D(32, 3, relu) on 28 x 28 x 1 -> MaxPool2D(2) -> Flatten ->
// Dense(10, softmax) — as the compiler's spec (what keras::dense_stack_spec makes of
// keras::example_cnn()), for tests that compile it without the Keras layer.
#pragma once

#include "tessera/dense_step.h"

namespace tessera::test {

inline compiler::DenseStackSpec example_cnn_spec() {
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::DenseStackSpec s;
  s.input_shape = {28, 28, 1};
  compiler::FeatureLayerSpec conv, pool;
  conv.kind = Kind::kConv;
  conv.filters = 32;
  conv.kernel = 3;
  conv.relu = true;
  pool.kind = Kind::kMaxPool;
  pool.pool = 2;
  s.features = {conv, pool};
  s.inputs = 13 * 13 * 32;
  s.layers = {{10, false}};
  return s;
}

}  // namespace tessera::test
