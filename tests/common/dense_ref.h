// A host reference of one DenseStackStep training step (tessera/dense_step.h), written from the
// numerics contract, not from the compiler: every MXU operand rounded to bf16 (RNE), each
// product exact in fp32, each N-long dot-product piece summed from +0 in order and added to the
// running fp32 sum piece by piece (docs/numerics.md), bias and relu in fp32, activations and
// gradients stored as bf16; softmax, log and exp from the host's libm (the chip uses VPU
// polynomials, so results agree to rounding, not bit for bit). Returns the gradients and the
// step's loss and correct count; `sgd_step` applies w -= lr g.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness/fp_ref.h"
#include "tessera/dense_step.h"

namespace tessera::test {

inline float bf16_round(float x) {
  return fp::f32(fp::bf16_to_fp32(fp::fp32_to_bf16(fp::bits(x))));
}

// sum_k a[k] b[k] over k < K in pieces of n, as the MXU and ACC do.
inline float mxu_dot(const std::vector<float>& a, size_t a0, size_t as,
                     const std::vector<float>& b, size_t b0, size_t bs, uint32_t K, int n) {
  float acc = 0.0f;
  for (uint32_t k0 = 0; k0 < K; k0 += n) {
    float piece = 0.0f;
    for (uint32_t k = k0; k < k0 + static_cast<uint32_t>(n); ++k) {
      const float p = k < K ? a[a0 + k * as] * b[b0 + k * bs] : 0.0f;
      piece = piece + p;
    }
    acc = k0 == 0 ? piece : acc + piece;
  }
  return acc;
}

struct DenseRefResult {
  compiler::DenseParams grads;
  float loss = 0, correct = 0;
};

// images: [B][inputs] bf16 bits; params in Keras layout.
// `step`: the training step's number from 1 (the Dropout masks').
inline DenseRefResult dense_reference_step(const compiler::DenseStackSpec& spec,
                                           const compiler::DenseParams& p,
                                           const std::vector<uint16_t>& images,
                                           const std::vector<uint8_t>& labels, int n,
                                           uint32_t step = 1) {
  const uint32_t B = static_cast<uint32_t>(labels.size()), L = spec.layers.size();
  std::vector<uint32_t> D{spec.inputs};
  for (const auto& l : spec.layers) D.push_back(l.units);
  // x[l]: [B][D_l] (bf16 values as floats); W16[l]: Keras [in][out] rounded
  std::vector<std::vector<float>> x(L + 1), w16(L);
  x[0].resize(size_t{B} * D[0]);
  for (size_t i = 0; i < x[0].size(); ++i) x[0][i] = fp::f32(fp::bf16_to_fp32(images[i]));
  for (uint32_t l = 0; l < L; ++l) {
    w16[l].resize(p.kernel[l].size());
    for (size_t i = 0; i < w16[l].size(); ++i) w16[l][i] = bf16_round(p.kernel[l][i]);
  }
  DenseRefResult r;
  std::vector<float> logits(size_t{B} * D[L]);
  for (uint32_t l = 1; l <= L; ++l) {
    x[l].resize(size_t{B} * D[l]);
    for (uint32_t s = 0; s < B; ++s)
      for (uint32_t u = 0; u < D[l]; ++u) {
        float z = mxu_dot(x[l - 1], size_t{s} * D[l - 1], 1, w16[l - 1], u, D[l], D[l - 1], n);
        z = z + p.bias[l - 1][u];
        if (l == L) {
          logits[size_t{s} * D[l] + u] = z;
        } else {
          if (spec.layers[l - 1].relu) z = std::max(z, 0.0f);
          const auto& d = spec.layers[l - 1];
          if (d.dropout > 0)  // kept: z x 1 / (1 - rate) in fp32; dropped: 0
            z = compiler::dropout_keep(d.dropout_seed, step, s, u, d.dropout)
                    ? z * (1.0f / (1.0f - d.dropout))
                    : 0.0f;
          x[l][size_t{s} * D[l] + u] = bf16_round(z);
        }
      }
  }
  // softmax cross-entropy; dz = bf16((p - onehot) * (1 / B))
  const uint32_t C = D[L];
  std::vector<std::vector<float>> dz(L + 1);
  dz[L].resize(size_t{B} * C);
  double loss = 0;
  const float inv_b = 1.0f / static_cast<float>(B);
  for (uint32_t s = 0; s < B; ++s) {
    const float* z = &logits[size_t{s} * C];
    float m = z[0];
    for (uint32_t c = 1; c < C; ++c) m = std::max(m, z[c]);
    double sum = 0;
    for (uint32_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(z[c] - m));
    loss += std::log(sum) - (z[labels[s]] - m);
    if (z[labels[s]] == m) r.correct += 1;
    for (uint32_t c = 0; c < C; ++c) {
      const float pr = static_cast<float>(std::exp(static_cast<double>(z[c] - m)) / sum);
      dz[L][size_t{s} * C + c] = bf16_round((pr - (c == labels[s] ? 1.0f : 0.0f)) * inv_b);
    }
  }
  r.loss = static_cast<float>(loss / B);
  r.grads.kernel.resize(L);
  r.grads.bias.resize(L);
  for (uint32_t l = L; l >= 1; --l) {
    if (l > 1) {  // dx = dz W^T, relu gradient by x > 0
      dz[l - 1].resize(size_t{B} * D[l - 1]);
      for (uint32_t s = 0; s < B; ++s)
        for (uint32_t k = 0; k < D[l - 1]; ++k) {
          float g = mxu_dot(dz[l], size_t{s} * D[l], 1, w16[l - 1], size_t{k} * D[l], 1, D[l], n);
          const auto& d = spec.layers[l - 2];
          if (d.relu && d.dropout > 0) g = g * (1.0f / (1.0f - d.dropout));
          if (d.relu && !(x[l - 1][size_t{s} * D[l - 1] + k] > 0)) g = 0;
          dz[l - 1][size_t{s} * D[l - 1] + k] = bf16_round(g);
        }
    }
    auto& gw = r.grads.kernel[l - 1];
    auto& gb = r.grads.bias[l - 1];
    gw.resize(size_t{D[l - 1]} * D[l]);
    gb.resize(D[l]);
    const std::vector<float> ones(B, 1.0f);
    for (uint32_t u = 0; u < D[l]; ++u) {
      for (uint32_t k = 0; k < D[l - 1]; ++k)
        gw[size_t{k} * D[l] + u] = mxu_dot(dz[l], u, D[l], x[l - 1], k, D[l - 1], B, n);
      gb[u] = mxu_dot(ones, 0, 1, dz[l], u, D[l], B, n);
    }
  }
  return r;
}

// A random legal Dense stack for the tests and the rtl sweep: 1 to 4 layers, widths 1 .. 40
// (the softmax layer 2 .. 21 classes), inputs 1 .. 70, relu or linear hidden layers (a third
// of the relu ones followed by Dropout 0.1 .. 0.5), batch 1 .. 24: none a multiple of N by
// design.
struct Arch {
  compiler::DenseStackSpec spec;
  uint32_t batch = 0;
};
inline Arch random_arch(std::mt19937& rng) {
  Arch a;
  a.spec.inputs = 1 + rng() % 70;
  const uint32_t depth = 1 + rng() % 4;
  for (uint32_t l = 0; l < depth; ++l) {
    compiler::DenseLayerSpec d;
    d.units = l + 1 == depth ? 2 + rng() % 20 : 1 + rng() % 40;
    d.relu = l + 1 < depth && rng() % 4 != 0;
    if (d.relu && rng() % 3 == 0) {  // Dropout after a third of the relu layers
      d.dropout = 0.1f + 0.1f * static_cast<float>(rng() % 5);
      d.dropout_seed = rng();
    }
    a.spec.layers.push_back(d);
  }
  a.batch = 1 + rng() % 24;
  return a;
}
inline std::string describe(const Arch& a) {
  std::string s = "inputs " + std::to_string(a.spec.inputs);
  for (const auto& l : a.spec.layers)
    s += " -> Dense(" + std::to_string(l.units) + (l.relu ? ", relu)" : ")") +
         (l.dropout > 0 ? " -> Dropout(" + std::to_string(l.dropout) + ")" : "");
  return s + " batch " + std::to_string(a.batch);
}

}  // namespace tessera::test
