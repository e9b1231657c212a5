// A host reference of one DenseStackStep training step (tessera/dense_step.h), written from the
// numerics contract, not from the compiler: every MXU operand rounded to bf16 (RNE), each
// product exact in fp32, each N-long dot-product piece summed from +0 in order and added to the
// running fp32 sum piece by piece (docs/numerics.md), bias and relu in fp32, activations and
// gradients stored as bf16; softmax, log and exp from the host's libm (the chip uses VPU
// polynomials, so results agree to rounding, not bit for bit). Returns the gradients and the
// step's loss and correct count; `sgd_step` applies w -= lr g.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"

namespace tessera::test {

inline float bf16_round(float x) {
  return fp::f32(fp::bf16_to_fp32(fp::fp32_to_bf16(fp::bits(x))));
}

// sum_k a[k] b[k] over k < K in pieces of n, as the MXU and ACC do.
inline float mxu_dot(const std::vector<float>& a, size_t a0, size_t as, const std::vector<float>& b,
                     size_t b0, size_t bs, uint32_t K, int n) {
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

// A feature map per sample [B][h][w][c] (bf16 values as floats).
struct RefMap {
  compiler::Shape3 s;
  std::vector<float> v;
  float& at(uint32_t b, uint32_t y, uint32_t x, uint32_t c) {
    return v[((size_t{b} * s.h + y) * s.w + x) * s.c + c];
  }
  float at(uint32_t b, uint32_t y, uint32_t x, uint32_t c) const {
    return v[((size_t{b} * s.h + y) * s.w + x) * s.c + c];
  }
};
// The convolution's geometry as TensorFlow defines it (padding same: the extra row and column
// at the bottom and right).
struct RefConv {
  uint32_t k, s, pt, pl, ho, wo;
};
inline RefConv ref_conv(const compiler::Shape3& in, const compiler::FeatureLayerSpec& f) {
  RefConv g{f.kernel, f.stride, 0, 0, 0, 0};
  if (f.same) {
    g.ho = (in.h + f.stride - 1) / f.stride;
    g.wo = (in.w + f.stride - 1) / f.stride;
    g.pt = static_cast<uint32_t>(std::max<int>(0, int(g.ho - 1) * f.stride + f.kernel - in.h) / 2);
    g.pl = static_cast<uint32_t>(std::max<int>(0, int(g.wo - 1) * f.stride + f.kernel - in.w) / 2);
  } else {
    g.ho = (in.h - f.kernel) / f.stride + 1;
    g.wo = (in.w - f.kernel) / f.stride + 1;
  }
  return g;
}

// images: [B][inputs] bf16 bits (with features: [B][H][W][C]); params in Keras layout.
// `step`: the training step's number from 1 (the Dropout masks'). A Conv2D + MaxPool2D pair
// that the chip runs fused (conv_pool_fused on driver::chip_for_array(n)) routes the pooled
// gradient to the first window position holding the max of the fp32 sums before the bias, and
// only where max + bias > 0 (the chip's argmax; the pooled values are the same either way).
inline DenseRefResult dense_reference_step(const compiler::DenseStackSpec& spec,
                                           const compiler::DenseParams& p,
                                           const std::vector<uint16_t>& images,
                                           const std::vector<uint8_t>& labels, int n,
                                           uint32_t step = 1, float label_smoothing = 0) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  const uint32_t B = static_cast<uint32_t>(labels.size()), L = spec.layers.size();
  const uint32_t nf = spec.features.size();
  uint32_t J0 = 0;  // the Conv2D layers (their weights come first)
  for (const auto& f : spec.features) J0 += f.kind == Kind::kConv;
  std::vector<uint32_t> D{spec.inputs};
  for (const auto& l : spec.layers) D.push_back(l.units);
  std::vector<std::vector<float>> w16(J0 + L);
  for (uint32_t j = 0; j < J0 + L; ++j) {
    w16[j].resize(p.kernel[j].size());
    for (size_t i = 0; i < w16[j].size(); ++i) w16[j][i] = bf16_round(p.kernel[j][i]);
  }
  // ---- the layers before Flatten ----
  std::vector<RefMap> maps(nf + 1);          // [0] the input, [i + 1] op i's output
  std::vector<std::vector<float>> cols(nf);  // a conv's im2col rows
  std::vector<std::vector<float>> raw(nf);   // a fused conv's fp32 sums before the bias
  const ChipShape chip = driver::chip_for_array(n);
  maps[0].s = spec.input_shape;
  if (nf) {
    maps[0].v.resize(images.size());
    for (size_t i = 0; i < images.size(); ++i) maps[0].v[i] = fp::f32(fp::bf16_to_fp32(images[i]));
  }
  for (uint32_t i = 0, j = 0; i < nf; ++i) {
    const auto& f = spec.features[i];
    const RefMap& x = maps[i];
    RefMap& y = maps[i + 1];
    if (f.kind == Kind::kConv) {
      const RefConv g = ref_conv(x.s, f);
      const uint32_t C = x.s.c, F = f.filters, K = g.k * g.k * C;
      y.s = {g.ho, g.wo, F};
      y.v.resize(size_t{B} * g.ho * g.wo * F);
      auto& col = cols[i];
      col.assign(size_t{B} * g.ho * g.wo * K, 0.0f);
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t oy = 0; oy < g.ho; ++oy)
          for (uint32_t ox = 0; ox < g.wo; ++ox) {
            const size_t m = (size_t{b} * g.ho + oy) * g.wo + ox;
            for (uint32_t ky = 0; ky < g.k; ++ky)
              for (uint32_t kx = 0; kx < g.k; ++kx) {
                const int iy = int(g.s * oy + ky) - int(g.pt), ix = int(g.s * ox + kx) - int(g.pl);
                if (iy < 0 || ix < 0 || iy >= int(x.s.h) || ix >= int(x.s.w)) continue;
                for (uint32_t c = 0; c < C; ++c)
                  col[m * K + (ky * g.k + kx) * C + c] = x.at(b, iy, ix, c);
              }
            for (uint32_t u = 0; u < F; ++u) {
              const float sum = mxu_dot(col, m * K, 1, w16[j], u, F, K, n);
              if (compiler::conv_pool_fused(spec, i, chip)) {
                raw[i].resize(size_t{B} * g.ho * g.wo * F);
                raw[i][m * F + u] = sum;
              }
              float z = sum + p.bias[j][u];
              if (f.relu) z = std::max(z, 0.0f);
              y.v[m * F + u] = bf16_round(z);
            }
          }
      ++j;
    } else {
      const uint32_t q = f.pool;
      y.s = {x.s.h / q, x.s.w / q, x.s.c};
      y.v.resize(size_t{B} * y.s.size());
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t oy = 0; oy < y.s.h; ++oy)
          for (uint32_t ox = 0; ox < y.s.w; ++ox)
            for (uint32_t c = 0; c < x.s.c; ++c) {
              float acc = x.at(b, q * oy, q * ox, c);
              for (uint32_t t = 1; t < q * q; ++t) {
                const float v = x.at(b, q * oy + t / q, q * ox + t % q, c);
                acc = f.kind == Kind::kMaxPool ? std::max(acc, v) : acc + v;
              }
              if (f.kind == Kind::kAvgPool) acc = acc / static_cast<float>(q * q);
              y.at(b, oy, ox, c) = bf16_round(acc);
            }
    }
  }
  // x[l]: [B][D_l] (bf16 values as floats); w16[J0 + l - 1]: Keras [in][out] rounded
  std::vector<std::vector<float>> x(L + 1);
  if (nf) {
    x[0] = maps[nf].v;
  } else {
    x[0].resize(size_t{B} * D[0]);
    for (size_t i = 0; i < x[0].size(); ++i) x[0][i] = fp::f32(fp::bf16_to_fp32(images[i]));
  }
  DenseRefResult r;
  std::vector<float> logits(size_t{B} * D[L]);
  for (uint32_t l = 1; l <= L; ++l) {
    const auto& wl = w16[J0 + l - 1];
    const auto& bl = p.bias[J0 + l - 1];
    x[l].resize(size_t{B} * D[l]);
    for (uint32_t s = 0; s < B; ++s)
      for (uint32_t u = 0; u < D[l]; ++u) {
        float z = mxu_dot(x[l - 1], size_t{s} * D[l - 1], 1, wl, u, D[l], D[l - 1], n);
        z = z + bl[u];
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
  // softmax cross-entropy against targets t (one-hot, or with label smoothing eps
  // (1 - eps) one-hot + eps / C: Keras's CategoricalCrossentropy); loss -sum_c t_c log p_c;
  // dz = bf16((p - t) * (1 / B))
  const uint32_t C = D[L];
  const float t_lo = label_smoothing / static_cast<float>(C),
              t_hi = (1.0f - label_smoothing) + t_lo;
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
    const double log_sum = std::log(sum);
    for (uint32_t c = 0; c < C; ++c)
      loss -= double(c == labels[s] ? t_hi : t_lo) * (double(z[c] - m) - log_sum);
    if (z[labels[s]] == m) r.correct += 1;
    for (uint32_t c = 0; c < C; ++c) {
      const float pr = static_cast<float>(std::exp(static_cast<double>(z[c] - m)) / sum);
      dz[L][size_t{s} * C + c] = bf16_round((pr - (c == labels[s] ? t_hi : t_lo)) * inv_b);
    }
  }
  r.loss = static_cast<float>(loss / B);
  r.grads.kernel.resize(J0 + L);
  r.grads.bias.resize(J0 + L);
  bool any_conv = J0 > 0;
  const bool last_relu_conv =
      nf && spec.features.back().kind == Kind::kConv && spec.features.back().relu;
  for (uint32_t l = L; l >= 1; --l) {
    const auto& wl = w16[J0 + l - 1];
    if (l > 1 || any_conv) {  // dx = dz W^T, relu gradient by x > 0
      dz[l - 1].resize(size_t{B} * D[l - 1]);
      const bool relu = l > 1 ? spec.layers[l - 2].relu : last_relu_conv;
      const float drop = l > 1 ? spec.layers[l - 2].dropout : 0.0f;
      for (uint32_t s = 0; s < B; ++s)
        for (uint32_t k = 0; k < D[l - 1]; ++k) {
          float g = mxu_dot(dz[l], size_t{s} * D[l], 1, wl, size_t{k} * D[l], 1, D[l], n);
          if (relu && drop > 0) g = g * (1.0f / (1.0f - drop));
          if (relu && !(x[l - 1][size_t{s} * D[l - 1] + k] > 0)) g = 0;
          dz[l - 1][size_t{s} * D[l - 1] + k] = bf16_round(g);
        }
    }
    auto& gw = r.grads.kernel[J0 + l - 1];
    auto& gb = r.grads.bias[J0 + l - 1];
    gw.resize(size_t{D[l - 1]} * D[l]);
    gb.resize(D[l]);
    const std::vector<float> ones(B, 1.0f);
    for (uint32_t u = 0; u < D[l]; ++u) {
      for (uint32_t k = 0; k < D[l - 1]; ++k)
        gw[size_t{k} * D[l] + u] = mxu_dot(dz[l], u, D[l], x[l - 1], k, D[l - 1], B, n);
      gb[u] = mxu_dot(ones, 0, 1, dz[l], u, D[l], B, n);
    }
  }
  // ---- the layers before Flatten, backward: g = the gradient of op i's output (a conv's:
  // before its relu, the consumer applies it) ----
  if (!any_conv) return r;
  int first_conv = -1;
  for (uint32_t i = 0; i < nf && first_conv < 0; ++i)
    if (spec.features[i].kind == Kind::kConv) first_conv = int(i);
  std::vector<float> g = dz[0];
  for (int i = int(nf) - 1, j = int(J0) - 1; i >= first_conv; --i) {
    const auto& f = spec.features[i];
    const RefMap& xin = maps[i];
    const RefMap& y = maps[i + 1];
    const bool prev_relu =
        i > 0 && spec.features[i - 1].kind == Kind::kConv && spec.features[i - 1].relu;
    std::vector<float> gin;
    if (i > first_conv) gin.assign(size_t{B} * xin.s.size(), 0.0f);
    auto in_at = [&](uint32_t b, uint32_t yy, uint32_t xx, uint32_t c) {
      return ((size_t{b} * xin.s.h + yy) * xin.s.w + xx) * xin.s.c + c;
    };
    const bool fused = i > 0 && compiler::conv_pool_fused(spec, i - 1, chip);
    if (fused) {  // the chip's argmax: on the conv's fp32 sums before the bias
      const auto& s = raw[i - 1];
      const auto& bias = p.bias[j];
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t oy = 0; oy < y.s.h; ++oy)
          for (uint32_t ox = 0; ox < y.s.w; ++ox)
            for (uint32_t c = 0; c < y.s.c; ++c) {
              const float go = g[((size_t{b} * y.s.h + oy) * y.s.w + ox) * y.s.c + c];
              float tap[4];
              for (uint32_t t = 0; t < 4; ++t)
                tap[t] = s[in_at(b, 2 * oy + t / 2, 2 * ox + t % 2, c)];
              const float m = std::max(std::max(tap[0], tap[1]), std::max(tap[2], tap[3]));
              uint32_t code = 3;
              for (uint32_t t = 3; t-- > 0;)
                if (tap[t] == m) code = t;
              const bool on = m + bias[c] > 0;
              for (uint32_t t = 0; t < 4; ++t)
                gin[in_at(b, 2 * oy + t / 2, 2 * ox + t % 2, c)] =
                    t == code && on ? bf16_round(go) : 0.0f;
            }
    } else if (f.kind != Kind::kConv) {
      const uint32_t q = f.pool;
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t oy = 0; oy < y.s.h; ++oy)
          for (uint32_t ox = 0; ox < y.s.w; ++ox)
            for (uint32_t c = 0; c < y.s.c; ++c) {
              const float go = g[((size_t{b} * y.s.h + oy) * y.s.w + ox) * y.s.c + c];
              float m = xin.at(b, q * oy, q * ox, c);
              for (uint32_t t = 1; t < q * q; ++t)
                m = std::max(m, xin.at(b, q * oy + t / q, q * ox + t % q, c));
              bool taken = false;
              for (uint32_t t = 0; t < q * q; ++t) {
                const uint32_t yy = q * oy + t / q, xx = q * ox + t % q;
                const float xt = xin.at(b, yy, xx, c);
                float v;
                if (f.kind == Kind::kMaxPool) {
                  const bool mine = !taken && xt == m;
                  taken |= mine;
                  v = mine && (!prev_relu || xt > 0) ? go : 0.0f;
                } else {
                  v = go / static_cast<float>(q * q);
                  if (prev_relu && !(xt > 0)) v = 0.0f;
                }
                gin[in_at(b, yy, xx, c)] = bf16_round(v);
              }
            }
    } else {
      const RefConv cg = ref_conv(xin.s, f);
      const uint32_t Cin = xin.s.c, F = f.filters, K = cg.k * cg.k * Cin, M = B * y.s.h * y.s.w;
      auto& gw = r.grads.kernel[j];
      auto& gb = r.grads.bias[j];
      gw.resize(size_t{K} * F);
      gb.resize(F);
      const std::vector<float> ones(M, 1.0f);
      for (uint32_t u = 0; u < F; ++u) {
        for (uint32_t kk = 0; kk < K; ++kk)
          gw[size_t{kk} * F + u] = mxu_dot(g, u, F, cols[i], kk, K, M, n);
        gb[u] = mxu_dot(ones, 0, 1, g, u, F, M, n);
      }
      if (i > first_conv) {  // dx: the gradient's im2col times the flipped kernel
        const uint32_t Kd = cg.k * cg.k * F;
        std::vector<float> row(Kd), wflip(size_t{Kd} * Cin);
        for (uint32_t ky = 0; ky < cg.k; ++ky)
          for (uint32_t kx = 0; kx < cg.k; ++kx)
            for (uint32_t u = 0; u < F; ++u)
              for (uint32_t c = 0; c < Cin; ++c)
                wflip[(((cg.k - 1 - ky) * cg.k + (cg.k - 1 - kx)) * F + u) * Cin + c] =
                    w16[j][((ky * cg.k + kx) * Cin + c) * F + u];
        for (uint32_t b = 0; b < B; ++b)
          for (uint32_t yy = 0; yy < xin.s.h; ++yy)
            for (uint32_t xx = 0; xx < xin.s.w; ++xx) {
              std::fill(row.begin(), row.end(), 0.0f);
              for (uint32_t ky = 0; ky < cg.k; ++ky)
                for (uint32_t kx = 0; kx < cg.k; ++kx) {
                  const int ty = int(yy) + int(cg.pt) - int(ky),
                            tx = int(xx) + int(cg.pl) - int(kx);
                  if (ty < 0 || tx < 0 || ty % int(cg.s) || tx % int(cg.s)) continue;
                  const uint32_t oy = ty / cg.s, ox = tx / cg.s;
                  if (oy >= y.s.h || ox >= y.s.w) continue;
                  for (uint32_t u = 0; u < F; ++u)
                    row[((cg.k - 1 - ky) * cg.k + (cg.k - 1 - kx)) * F + u] =
                        g[((size_t{b} * y.s.h + oy) * y.s.w + ox) * F + u];
                }
              for (uint32_t c = 0; c < Cin; ++c) {
                float v = mxu_dot(row, 0, 1, wflip, c, Cin, Kd, n);
                if (prev_relu && !(xin.at(b, yy, xx, c) > 0)) v = 0.0f;
                gin[in_at(b, yy, xx, c)] = bf16_round(v);
              }
            }
      }
      --j;
    }
    g = std::move(gin);
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
// A random legal convolutional network: an input of 4..12 x 4..12 x 1..3, 1 to 4 layers
// before Flatten (Conv2D with 1..12 filters, kernel 1..7, stride 1 or 2, valid or same, relu or
// linear; MaxPool2D / AveragePooling2D with pool 2 or 3), then 1 or 2 Dense layers; batch 1..6.
inline Arch random_conv_arch(std::mt19937& rng) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  Arch a;
  compiler::Shape3 s{4 + uint32_t(rng() % 9), 4 + uint32_t(rng() % 9), 1 + uint32_t(rng() % 3)};
  a.spec.input_shape = s;
  const uint32_t depth = 1 + rng() % 4;
  for (uint32_t t = 0; t < depth; ++t) {
    compiler::FeatureLayerSpec f;
    if (rng() % 3 != 0 || a.spec.features.empty()) {
      f.kind = Kind::kConv;
      f.filters = 1 + rng() % 12;
      f.kernel = 1 + rng() % 7;
      f.stride = 1 + rng() % 2;
      f.same = rng() % 2;
      f.relu = rng() % 4 != 0;
      if (f.kernel > std::min(s.h, s.w)) f.same = true;
      const RefConv g = ref_conv(s, f);
      s = {g.ho, g.wo, f.filters};
    } else {
      f.kind = rng() % 2 ? Kind::kMaxPool : Kind::kAvgPool;
      f.pool = 2 + rng() % 2;
      if (s.h < f.pool || s.w < f.pool) continue;
      s = {s.h / f.pool, s.w / f.pool, s.c};
    }
    a.spec.features.push_back(f);
  }
  a.spec.inputs = static_cast<uint32_t>(s.size());
  const uint32_t dense = 1 + rng() % 2;
  for (uint32_t l = 0; l < dense; ++l) {
    compiler::DenseLayerSpec d;
    d.units = l + 1 == dense ? 2 + rng() % 11 : 1 + rng() % 20;
    d.relu = l + 1 < dense;
    a.spec.layers.push_back(d);
  }
  a.batch = 1 + rng() % 6;
  return a;
}
// The values of one input sample: the input map's with features, else the Flatten size.
inline uint32_t image_values(const compiler::DenseStackSpec& spec) {
  return spec.features.empty() ? spec.inputs : static_cast<uint32_t>(spec.input_shape.size());
}
inline std::string describe(const Arch& a) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  std::string s;
  if (!a.spec.features.empty()) {
    const auto& i = a.spec.input_shape;
    s = "input " + std::to_string(i.h) + "x" + std::to_string(i.w) + "x" + std::to_string(i.c);
    for (const auto& f : a.spec.features)
      s += f.kind == Kind::kConv
               ? " -> Conv2D(" + std::to_string(f.filters) + ", " + std::to_string(f.kernel) +
                     ", stride " + std::to_string(f.stride) + (f.same ? ", same" : ", valid") +
                     (f.relu ? ", relu)" : ")")
               : std::string(f.kind == Kind::kMaxPool ? " -> MaxPool(" : " -> AvgPool(") +
                     std::to_string(f.pool) + ")";
    s += " -> Flatten " + std::to_string(a.spec.inputs);
  } else {
    s = "inputs " + std::to_string(a.spec.inputs);
  }
  for (const auto& l : a.spec.layers)
    s += " -> Dense(" + std::to_string(l.units) + (l.relu ? ", relu)" : ")") +
         (l.dropout > 0 ? " -> Dropout(" + std::to_string(l.dropout) + ")" : "");
  return s + " batch " + std::to_string(a.batch);
}

}  // namespace tessera::test
