#!/usr/bin/python3
"""Independent PyTorch reference for the Dense stacks Tessera compiles (DenseStackStep).

Reads the weight export of `tessera train` (docs/training.md, "Weight export"):
    DIR/manifest.json   {"format": "tessera-dense-weights-1", "inputs": K, "layers": [
                         {"units", "activation", "kernel": {"file", "shape"}, "bias": {...}}]}
    DIR/<file>.f32      raw little-endian float32; kernels [inputs][units] (Keras layout)

Modes:
  selftest             the hand-written forward/backward (fp32, no rounding) against torch
                       autograd on nn.Linear layers
  export-check RUN     loads RUN/weights into a plain torch nn.Sequential (Linear.weight =
                       kernel^T) and checks its softmax on the first test images against
                       RUN/weights/test_probs.f32, the chip's (fp32 in torch; the chip rounds
                       MXU operands to bf16, so agreement is to that rounding)
  train                the same model in fp32 PyTorch from the same initial weights and sample
                       order for E epochs: the accuracy comparison
  loss-match           trains from an initial-weights export (tessera train --dump-init) on the
                       sample order of `tessera data-order` with Adam (Keras form), the chip's
                       rounding points (bf16 MXU operands and activations) and the MXU's
                       accumulation order (mxu_matmul), and compares the per-step loss with a
                       metrics.csv (the softmax as the chip's VPU sequence computes it,
                       vpu_softmax; the reported loss's log is libm's)

Only the standard library, numpy and torch are used.
"""

import argparse
import gzip
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DATA = "/usr/share/datasets/fashion-mnist"


def bf16_round(x):
    """Round fp32 to the nearest bf16 value (ties to even), as fp32."""
    u = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    r = torch.where(r >= 0x80000000, r - 0x100000000, r)
    return r.to(torch.int32).view(torch.float32).reshape(x.shape)


def read_idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            with open(p, "rb") as f:
                head = f.read(2)
            opener = gzip.open if head == b"\x1f\x8b" else open
            with opener(p, "rb") as f:
                data = f.read()
            magic = struct.unpack(">I", data[:4])[0]
            nd = magic & 0xFF
            dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
            return np.frombuffer(data[4 + 4 * nd:], dtype=np.uint8).reshape(dims)
    raise FileNotFoundError(path)


def load(data_dir, split):
    pre = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, pre + "-images-idx3-ubyte"))
    y = read_idx(os.path.join(data_dir, pre + "-labels-idx1-ubyte"))
    return x.reshape(len(x), -1), y


def load_sequential(d):
    """A tessera-sequential-weights-1 export (a model with layers before Flatten): the layer
    list with its tensors, and the parameters in order (kernel, bias of each layer with
    weights)."""
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    if m.get("format") != "tessera-sequential-weights-1":
        raise ValueError("%s: not a tessera-sequential-weights-1 export" % d)
    params = []
    for l in m["layers"]:
        for t in ("kernel", "bias"):
            if t in l:
                v = np.fromfile(os.path.join(d, l[t]["file"]), dtype="<f4")
                params.append(torch.from_numpy(v.copy()).reshape(l[t]["shape"]))
    return m, params


def seq_forward(m, params, x, train=False):
    """Logits of a sequential export in fp32 torch: NHWC input, TensorFlow's same padding (the
    extra row and column at the bottom and right), Keras kernels [kh][kw][in][out], Flatten in
    NHWC order; Dropout active when training."""
    H, W, C = m["input_shape"]
    h = x.reshape(-1, H, W, C).permute(0, 3, 1, 2)
    i = 0
    for l in m["layers"]:
        c = l["class_name"]
        if c == "Conv2D":
            k, s = l["kernel_size"], l["strides"]
            if l["padding"] == "same":
                ih, iw = h.shape[2], h.shape[3]
                ph = max((-(-ih // s) - 1) * s + k - ih, 0)
                pw = max((-(-iw // s) - 1) * s + k - iw, 0)
                h = torch.nn.functional.pad(h, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))
            h = torch.nn.functional.conv2d(h, params[i].permute(3, 2, 0, 1), params[i + 1],
                                           stride=s)
            i += 2
            if l["activation"] == "relu":
                h = torch.relu(h)
        elif c == "MaxPool2D":
            h = torch.nn.functional.max_pool2d(h, l["pool_size"])
        elif c == "AveragePooling2D":
            h = torch.nn.functional.avg_pool2d(h, l["pool_size"])
        elif c == "Flatten":
            h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)
        elif c == "Dense":
            h = h @ params[i] + params[i + 1]
            i += 2
            if l["activation"] == "relu":
                h = torch.relu(h)
        elif c == "Dropout":
            h = torch.nn.functional.dropout(h, l["rate"], training=train)
        else:
            raise ValueError("layer class %s" % c)
    return h


def is_sequential(d):
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f).get("format") == "tessera-sequential-weights-1"


def load_weights(d):
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    if m.get("format") != "tessera-dense-weights-1":
        raise ValueError("%s: not a tessera-dense-weights-1 export" % d)
    layers = []
    for l in m["layers"]:
        k = np.fromfile(os.path.join(d, l["kernel"]["file"]), dtype="<f4")
        b = np.fromfile(os.path.join(d, l["bias"]["file"]), dtype="<f4")
        k = torch.from_numpy(k.copy()).reshape(l["kernel"]["shape"])
        b = torch.from_numpy(b.copy()).reshape(l["bias"]["shape"])
        layers.append((k, b, l["activation"]))
    return m, layers


def pixels(x_u8, m=None):
    """The images as the host feeds the chip: p / 255 in fp32, or with the export's
    "normalization" (Keras's Normalization as the first layer) (p / 255 - mean) /
    max(sqrt(variance), 1e-7), every step in fp32."""
    x = torch.from_numpy(x_u8.astype(np.float32)) / 255.0
    nz = (m or {}).get("normalization")
    if nz:
        mean = torch.tensor(np.float32(nz["mean"]))
        scale = torch.tensor(max(np.sqrt(np.float32(nz["variance"])), np.float32(1e-7)))
        x = (x - mean) / scale
    return x


def mxu_matmul(a, b, n):
    """a @ b as the MXU and its ACC compute it (docs/numerics.md): bf16 operands, every product
    exact in fp32, each N-long piece of the contraction summed from +0 in order, the pieces
    added to the running fp32 sum in order."""
    K = a.shape[1]
    acc = None
    for t0 in range(0, K, n):
        piece = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
        for k in range(t0, min(t0 + n, K)):
            piece = piece + a[:, k:k + 1] * b[k:k + 1, :]
        acc = piece if acc is None else acc + piece
    return acc


def mxu_matmul_long(a, b, n):
    """mxu_matmul with the pieces computed side by side (the same operations in the same order,
    vectorised over pieces): for long contractions."""
    M, K = a.shape
    P = -(-K // n)
    if P * n != K:
        a = torch.nn.functional.pad(a, (0, P * n - K))
        b = torch.nn.functional.pad(b, (0, 0, 0, P * n - K))
    a3 = a.reshape(M, P, n)
    b3 = b.reshape(P, n, b.shape[1])
    piece = torch.zeros(P, M, b.shape[1], dtype=torch.float32)
    for k in range(n):
        piece = piece + a3[:, :, k].t().unsqueeze(2) * b3[:, k, :].unsqueeze(1)
    acc = piece[0]
    for p in range(1, P):
        acc = acc + piece[p]
    return acc


def im2col(h, k, s, pt, pl, ho, wo):
    """[B][H][W][C] -> [B ho wo][k k C], columns (ky, kx, c), zero outside the map."""
    B, H, W, C = h.shape
    hp = torch.zeros(B, H + k + s * ho, W + k + s * wo, C)
    hp[:, pt:pt + H, pl:pl + W, :] = h
    cols = [hp[:, ky:ky + s * ho:s, kx:kx + s * wo:s, :][:, :ho, :wo, :]
            for ky in range(k) for kx in range(k)]
    return torch.stack(cols, dim=3).reshape(B * ho * wo, k * k * C)


def conv_geometry(l, H, W):
    k, s = l["kernel_size"], l["strides"]
    if l["padding"] == "same":
        ho, wo = -(-H // s), -(-W // s)
        return k, s, max((ho - 1) * s + k - H, 0) // 2, max((wo - 1) * s + k - W, 0) // 2, ho, wo
    return k, s, 0, 0, (H - k) // s + 1, (W - k) // s + 1


def seq_forward_backward(m, params, x, labels, rnd, n, softmax):
    """A sequential export's loss, correct count and gradients with the chip's rounding points
    (bf16 MXU operands and stored activations/gradients), the MXU's accumulation order and the
    chip's decomposition: a convolution as im2col x kernel, its input gradient as the
    gradient's im2col x the flipped kernel; the max-pool gradient to the first max; Dropout
    not modelled."""
    mm = lambda a, b: mxu_matmul_long(a, b, n)
    H, W, C = m["input_shape"]
    B = x.shape[0]
    h = rnd(x).reshape(B, H, W, C)
    tape = []
    i = 0
    layers = m["layers"]
    for l in layers:
        c = l["class_name"]
        if c == "Conv2D":
            _, Hh, Wh, Ch = h.shape
            k, s, pt, pl, ho, wo = conv_geometry(l, Hh, Wh)
            col = im2col(h, k, s, pt, pl, ho, wo)
            K2 = params[i].reshape(k * k * Ch, -1)
            z = mm(col, rnd(K2)) + params[i + 1]
            out = rnd(torch.relu(z) if l["activation"] == "relu" else z)
            tape.append(("conv", l, i, h, col, (k, s, pt, pl, ho, wo)))
            h = out.reshape(B, ho, wo, -1)
            i += 2
        elif c in ("MaxPool2D", "AveragePooling2D"):
            p = l["pool_size"]
            _, Hh, Wh, Ch = h.shape
            ho, wo = Hh // p, Wh // p
            taps = [h[:, dy:dy + p * ho:p, dx:dx + p * wo:p, :] for dy in range(p) for dx in range(p)]
            acc = taps[0]
            for t in taps[1:]:
                acc = torch.maximum(acc, t) if c == "MaxPool2D" else acc + t
            if c == "AveragePooling2D":
                acc = acc / np.float32(p * p)
            tape.append(("pool", l, None, h, taps, acc))
            h = rnd(acc)
        elif c == "Flatten":
            tape.append(("flatten", l, None, h, None, None))
            h = h.reshape(B, -1)
        elif c == "Dense":
            z = mm(h, rnd(params[i])) + params[i + 1]
            tape.append(("dense", l, i, h, None, None))
            h = z if l is layers[-1] else rnd(torch.relu(z) if l["activation"] == "relu" else z)
            i += 2
        else:
            raise ValueError("loss-match models no %s" % c)
    logits = h
    mx = logits.max(dim=1, keepdim=True).values
    lse = torch.log(torch.exp((logits - mx).double()).sum(dim=1)).float()
    zl = (logits - mx)[torch.arange(B), labels]
    loss = float((lse.double() - zl.double()).mean())
    correct = int((zl == 0).sum())
    pr = softmax(logits)
    onehot = torch.zeros_like(pr)
    onehot[torch.arange(B), labels] = 1
    g = rnd((pr - onehot) * np.float32(1.0 / B))
    grads = [None] * len(params)
    first_conv = next((j for j, t in enumerate(tape) if t[0] == "conv"), len(tape))

    def relu_mask(j, gi, xin):
        """the gradient times (x > 0) when tape[j - 1] is a relu conv or Dense"""
        if j > 0 and tape[j - 1][0] in ("conv", "dense") and tape[j - 1][1]["activation"] == "relu":
            return torch.where(xin > 0, gi, torch.zeros_like(gi))
        if j > 0 and tape[j - 1][0] == "flatten" and j > 1 and tape[j - 2][0] == "conv" and \
                tape[j - 2][1]["activation"] == "relu":
            return torch.where(xin > 0, gi, torch.zeros_like(gi))
        return gi

    for j in range(len(tape) - 1, -1, -1):
        kind, l, pi, xin, col, extra = tape[j]
        need_dx = j > first_conv
        if kind == "dense":
            K = params[pi]
            grads[pi] = mm(g.t(), xin).t()
            grads[pi + 1] = mm(torch.ones(1, B), g)[0]
            if need_dx or j > 0 and any(t[0] == "dense" for t in tape[:j]):
                g = rnd(relu_mask(j, mm(g, rnd(K).t()), xin))
        elif kind == "flatten":
            g = g.reshape(xin.shape)
        elif kind == "pool":
            if not need_dx:
                break
            p = l["pool_size"]
            taps, acc = col, extra
            Bq, ho, wo, Ch = acc.shape
            gin = torch.zeros_like(xin)
            taken = torch.zeros_like(acc, dtype=torch.bool)
            prev_relu = j > 0 and tape[j - 1][0] == "conv" and tape[j - 1][1]["activation"] == "relu"
            for t, xt in enumerate(taps):
                if l["class_name"] == "MaxPool2D":
                    mine = (xt == acc) & ~taken
                    taken |= mine
                    v = torch.where(mine, g, torch.zeros_like(g))
                else:
                    v = g / np.float32(p * p)
                if prev_relu:
                    v = torch.where(xt > 0, v, torch.zeros_like(v))
                dy, dx = divmod(t, p)
                gin[:, dy:dy + p * ho:p, dx:dx + p * wo:p, :] = rnd(v)
            g = gin
        else:  # conv
            k, s, pt, pl, ho, wo = extra
            Bq, Hh, Wh, Ch = xin.shape
            F = params[pi].shape[3]
            g2 = g.reshape(B * ho * wo, F)
            grads[pi] = mm(g2.t(), col).t().reshape(params[pi].shape)
            grads[pi + 1] = mm(torch.ones(1, B * ho * wo), g2)[0]
            if not need_dx:
                break
            # the gradient's im2col: row (b, y, x), column (k-1-ky, k-1-kx, f)
            gmap = g.reshape(B, ho, wo, F)
            colT = torch.zeros(B, Hh, Wh, k, k, F)
            for ky in range(k):
                for kx in range(k):
                    for oy in range(ho):
                        y = s * oy + ky - pt
                        if not 0 <= y < Hh:
                            continue
                        for ox in range(wo):
                            xx = s * ox + kx - pl
                            if 0 <= xx < Wh:
                                colT[:, y, xx, k - 1 - ky, k - 1 - kx, :] = gmap[:, oy, ox, :]
            w16 = rnd(params[pi])  # [ky][kx][c][f]
            wflip = torch.flip(w16, dims=(0, 1)).permute(0, 1, 3, 2).reshape(k * k * F, Ch)
            dx = mm(colT.reshape(B * Hh * Wh, k * k * F), wflip).reshape(B, Hh, Wh, Ch)
            prev_relu = j > 0 and tape[j - 1][0] == "conv" and tape[j - 1][1]["activation"] == "relu"
            if prev_relu:
                dx = torch.where(xin > 0, dx, torch.zeros_like(dx))
            g = rnd(dx)
    return loss, correct, grads


def f32(v):
    return torch.tensor(v, dtype=torch.float32)


def vpu_exp(x):
    """exp(x) for x <= 0 as the chip's VPU sequence computes it (sw/compiler/vpu_math.cc:
    Cody-Waite reduction by ln 2, the Cephes expf polynomial, 2^n in the exponent field), in
    the same fp32 operations; x is fp32."""
    x = torch.maximum(x, f32(-87.0))
    n = torch.trunc(x * f32(1.44269504088896341) - f32(0.5)).to(torch.int32)
    nf = n.to(torch.float32)
    r = x - nf * f32(0.693359375)
    r = r - nf * f32(-2.12194440e-4)
    c = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
         5.0000001201e-1]
    p = torch.full_like(r, c[0])
    for k in range(1, 6):
        p = p * r + f32(c[k])
    p = p * (r * r)
    p = p + r
    p = p + f32(1.0)
    two_n = ((n + 127) << 23).view(torch.float32)
    return p * two_n


def vpu_softmax(logits, n):
    """The chip's softmax of fp32 logits [B][C]: classes padded to whole N-lane tiles (-inf),
    e = vpu_exp(z - max), the tiles added lane by lane in order, then the lanes by the VPU's
    pairwise rsum tree; p = e / sum."""
    B, C = logits.shape
    cpad = (C + n - 1) // n * n
    z = torch.full((B, cpad), float("-inf"), dtype=torch.float32)
    z[:, :C] = logits
    m = z.max(dim=1, keepdim=True).values
    e = vpu_exp(z - m)
    e[:, C:] = 0
    tiles = e.reshape(B, cpad // n, n)
    acc = tiles[:, 0, :]
    for t in range(1, cpad // n):
        acc = acc + tiles[:, t, :]
    while acc.shape[1] > 1:
        acc = acc[:, 0::2] + acc[:, 1::2]
    return (e / acc)[:, :C]


def forward_backward(layers, x, labels, rnd, mm=lambda a, b: a @ b, softmax=None, ls=0.0):
    """Loss, correct count and gradients with rounding `rnd` at the chip's points, the matmul
    `mm` and the softmax `softmax` (default torch's, in float64), the targets label-smoothed by
    `ls` (0: one-hot)."""
    B = x.shape[0]
    acts = [rnd(x)]
    zs = []
    for i, (k, b, act) in enumerate(layers):
        z = mm(acts[-1], rnd(k)) + b
        zs.append(z)
        if i + 1 < len(layers):
            acts.append(rnd(torch.relu(z) if act == "relu" else z))
    logits = zs[-1]
    m = logits.max(dim=1, keepdim=True).values
    lse = torch.log(torch.exp((logits - m).double()).sum(dim=1)).float()
    zl = (logits - m)[torch.arange(B), labels]
    correct = int((zl == 0).sum())
    p = torch.softmax(logits.double(), dim=1).float() if softmax is None else softmax(logits)
    # targets: one-hot, or with label smoothing ls (1 - ls) one-hot + ls / C (Keras's
    # CategoricalCrossentropy(label_smoothing)); loss -sum t log p
    lo = np.float32(ls) / np.float32(p.shape[1])
    target = torch.full_like(p, float(lo))
    target[torch.arange(B), labels] = float(np.float32(1 - np.float32(ls)) + lo)
    loss = float((lse.double()[:, None] * target.double()
                  - target.double() * (logits - m).double()).sum(dim=1).mean())
    dz = rnd((p - target) * np.float32(1.0 / B))
    grads = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        k, b, _ = layers[i]
        gk = mm(dz.t(), acts[i]).t()
        gb = mm(torch.ones(1, B), dz)[0]
        grads[i] = (gk, gb)
        if i > 0:
            dx = mm(dz, rnd(k).t())
            if layers[i - 1][2] == "relu":
                dx = torch.where(acts[i] > 0, dx, torch.zeros_like(dx))
            dz = rnd(dx)
    return loss, correct, grads


def selftest():
    torch.manual_seed(0)
    dims = [13, 9, 7, 5]
    layers = [(torch.randn(dims[i], dims[i + 1]) * 0.3, torch.randn(dims[i + 1]) * 0.1,
               "relu" if i < 1 else ("linear" if i < 2 else "softmax")) for i in range(3)]
    x = torch.rand(6, dims[0])
    y = torch.tensor([0, 1, 2, 3, 4, 0])
    ok = True
    for ls in (0.0, 0.1):  # the plain and the label-smoothed loss against autograd
        loss, _, grads = forward_backward(layers, x, y, lambda t: t, ls=ls)
        params = [(k.clone().requires_grad_(), b.clone().requires_grad_()) for k, b, _ in layers]
        h = x
        for i, (k, b) in enumerate(params):
            h = torch.nn.functional.linear(h, k.t(), b)
            if layers[i][2] == "relu":
                h = torch.relu(h)
        ref = torch.nn.functional.cross_entropy(h, y, label_smoothing=ls)
        ref.backward()
        ok &= abs(ref.item() - loss) < 1e-5
        for (gk, gb), (k, b) in zip(grads, params):
            ok &= torch.allclose(gk, k.grad, atol=1e-5) and torch.allclose(gb, b.grad, atol=1e-5)
    a, b = torch.randn(7, 45), torch.randn(45, 5)
    ok &= bool(torch.equal(mxu_matmul(a, b, 16), mxu_matmul_long(a, b, 16)))
    print("selftest", "ok" if ok else "FAILED", "loss", loss, ref.item())
    return 0 if ok else 1


def export_check(run, data_dir, tol):
    probs = np.fromfile(os.path.join(run, "weights", "test_probs.f32"), dtype="<f4")
    if is_sequential(os.path.join(run, "weights")):
        m, params = load_sequential(os.path.join(run, "weights"))
        C = params[-1].shape[0]
        n = len(probs) // C
        x, _ = load(data_dir, "test")
        with torch.no_grad():
            p = torch.softmax(seq_forward(m, params, pixels(x[:n], m)), dim=1).numpy()
        return report_export(p, probs.reshape(n, C), n, tol)
    m, layers = load_weights(os.path.join(run, "weights"))
    C = layers[-1][0].shape[1]
    n = len(probs) // C
    x, _ = load(data_dir, "test")
    model = torch.nn.Sequential(torch.nn.Flatten())
    for k, b, act in layers:
        lin = torch.nn.Linear(k.shape[0], k.shape[1])
        with torch.no_grad():
            lin.weight.copy_(k.t())
            lin.bias.copy_(b)
        model.append(lin)
        if act == "relu":
            model.append(torch.nn.ReLU())
    model.append(torch.nn.Softmax(dim=1))
    with torch.no_grad():
        p = model(pixels(x[:n], m)).numpy()
    return report_export(p, probs.reshape(n, C), n, tol)


def report_export(p, chip, n, tol):
    diff = float(np.abs(p - chip).max())
    agree = float((p.argmax(1) == chip.argmax(1)).mean())
    print("export-check: %d images, max |p_torch - p_chip| = %.3g, argmax agreement %.4f"
          % (n, diff, agree))
    return 0 if diff <= tol and agree >= 0.99 else 1


class KerasAdam:
    """Adam in the Keras form, in fp32 as the chip computes it: lr_t = lr sqrt(1 - b2^t) /
    (1 - b1^t) from fp32 running powers; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
    w -= lr_t m / (sqrt(v) + eps). Over a list of tensors (step returns the new ones)."""

    def __init__(self, tensors, lr, b1=0.9, b2=0.999, eps=1e-7):
        self.lr, self.b1, self.b2, self.eps = (np.float32(lr), np.float32(b1), np.float32(b2),
                                               np.float32(eps))
        self.p1 = self.p2 = np.float32(1.0)
        self.state = [[torch.zeros_like(w), torch.zeros_like(w)] for w in tensors]

    def step(self, tensors, grads):
        b1, b2 = self.b1, self.b2
        self.p1 = np.float32(self.p1 * b1)
        self.p2 = np.float32(self.p2 * b2)
        lr_t = self.lr * np.float32(np.sqrt(np.float32(1) - self.p2) / (np.float32(1) - self.p1))
        out = []
        for w, g, (m, v) in zip(tensors, grads, self.state):
            m.mul_(b1).add_(g * (1 - b1))
            v.mul_(b2).add_(g * g * (1 - b2))
            out.append(w - lr_t * m / (torch.sqrt(v) + self.eps))
        return out


def flat(layers):
    return [t for k, b, _ in layers for t in (k, b)]


def unflat(tensors, layers):
    return [(tensors[2 * i], tensors[2 * i + 1], l[2]) for i, l in enumerate(layers)]


def dense_adam_step(adam, layers, grads):
    return unflat(adam.step(flat(layers), [t for g in grads for t in g]), layers)


def lr_schedule(name, lr, decay_steps):
    """Step t's learning rate as the host computes it (tessera/dense_step.h, OptimizerSpec::lr_at):
    fp32(lr * f(t)), f in double: constant 1; cosine (Keras CosineDecay, alpha 0)
    (1 + cos(pi t / T)) / 2; linear (PolynomialDecay to 0, power 1) 1 - t / T; t capped at T."""
    base = float(np.float32(lr))

    def at(t):
        if name == "constant" or decay_steps == 0:
            return np.float32(base)
        f = min(t, decay_steps) / decay_steps
        m = 0.5 * (1.0 + math.cos(math.pi * f)) if name == "cosine" else 1.0 - f
        return np.float32(base * m)
    return at


def loss_match_sequential(init, order_file, chip, data_dir, steps, batch, lr, n, sched):
    m, params = load_sequential(init)
    x, y = load(data_dir, "train")
    order = np.fromfile(order_file, dtype="<u4")
    steps = min(steps, len(chip), len(order) // batch)
    adam = KerasAdam(params, lr)
    rate = lr_schedule(sched, lr, len(chip))  # the schedule spans the chip's run
    worst = 0.0
    for s in range(steps):
        adam.lr = rate(s)
        ids = order[s * batch:(s + 1) * batch]
        loss, _, grads = seq_forward_backward(m, params, pixels(x[ids], m),
                                              torch.from_numpy(y[ids].astype(np.int64)),
                                              bf16_round, n, lambda z: vpu_softmax(z, n))
        rel = abs(loss - chip[s]) / max(abs(chip[s]), 1e-12)
        if os.environ.get("DENSE_REF_VERBOSE"):
            print("step %d torch %.7f chip %.7f rel %.2e" % (s, loss, chip[s], rel))
        worst = max(worst, rel)
        params = adam.step(params, grads)
    return steps, worst


def chip_losses(metrics):
    """The per-step loss column of a run's metrics.csv (found by its header name)."""
    with open(metrics) as f:
        lines = f.read().splitlines()
    col = lines[0].split(",").index("loss")
    return [float(r.split(",")[col]) for r in lines[1:] if r]


def loss_match(init, order_file, metrics, data_dir, steps, batch, lr, tol, n, sched):
    if is_sequential(init):
        chip = chip_losses(metrics)
        steps, worst = loss_match_sequential(init, order_file, chip, data_dir, steps, batch, lr, n, sched)
        print("loss-match: %d steps, worst relative difference %.3g (tolerance %g)"
              % (steps, worst, tol))
        return 0 if worst <= tol else 1
    m, layers = load_weights(init)
    x, y = load(data_dir, "train")
    order = np.fromfile(order_file, dtype="<u4")
    chip = chip_losses(metrics)
    steps = min(steps, len(chip), len(order) // batch)
    adam = KerasAdam(flat(layers), lr)
    rate = lr_schedule(sched, lr, len(chip))  # the schedule spans the chip's run
    worst = 0.0
    for s in range(steps):
        adam.lr = rate(s)
        ids = order[s * batch:(s + 1) * batch]
        xb = pixels(x[ids], m)
        loss, _, grads = forward_backward(layers, xb, torch.from_numpy(y[ids].astype(np.int64)),
                                          bf16_round, lambda a, b: mxu_matmul(a, b, n),
                                          lambda z: vpu_softmax(z, n))
        rel = abs(loss - chip[s]) / max(abs(chip[s]), 1e-12)
        if os.environ.get("DENSE_REF_VERBOSE"):
            print("step %d torch %.7f chip %.7f rel %.2e" % (s, loss, chip[s], rel))
        worst = max(worst, rel)
        layers = dense_adam_step(adam, layers, grads)
    print("loss-match: %d steps, worst relative difference %.3g (tolerance %g)" % (steps, worst, tol))
    return 0 if worst <= tol else 1


def train_sequential(init, order_file, data_dir, epochs, batch, lr, sched, b1=0.9, b2=0.999,
                     ls=0.0):
    """train for a model with layers before Flatten: torch's conv2d, pooling and dropout
    (seeded, torch's masks, not the chip's), the gradients by autograd."""
    m, params = load_sequential(init)
    x, y = load(data_dir, "train")
    xt, yt = load(data_dir, "test")
    order = np.fromfile(order_file, dtype="<u4")
    steps = min(len(order) // batch, epochs * (len(x) // batch))
    adam = KerasAdam(params, lr, b1, b2)
    rate = lr_schedule(sched, lr, steps)
    torch.manual_seed(0)
    for s in range(steps):
        adam.lr = rate(s)
        ids = order[s * batch:(s + 1) * batch]
        ps = [p.clone().requires_grad_() for p in params]
        loss = torch.nn.functional.cross_entropy(
            seq_forward(m, ps, pixels(x[ids], m), train=True),
            torch.from_numpy(y[ids].astype(np.int64)), label_smoothing=ls)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            params = adam.step(params, grads)
    with torch.no_grad():
        h = torch.cat([seq_forward(m, params, pixels(xt[i:i + 1000], m))
                       for i in range(0, len(xt), 1000)])
    lab = torch.from_numpy(yt.astype(np.int64))
    acc = float((h.argmax(1) == lab).float().mean())
    loss = float(torch.nn.functional.cross_entropy(h, lab))
    print("train: %d steps, test accuracy %.4f loss %.4f" % (steps, acc, loss))
    return 0


def train(init, order_file, data_dir, epochs, batch, lr, sched, b1=0.9, b2=0.999, ls=0.0):
    """The same model in plain fp32 PyTorch arithmetic (no bf16 rounding), trained from the
    initial-weights export on the chip run's sample order (tessera data-order) with Adam
    (Keras form, beta_1 b1, beta_2 b2) and label smoothing ls; prints the test accuracy and the
    (unsmoothed) test loss."""
    if is_sequential(init):
        return train_sequential(init, order_file, data_dir, epochs, batch, lr, sched, b1, b2, ls)
    m, layers = load_weights(init)
    x, y = load(data_dir, "train")
    xt, yt = load(data_dir, "test")
    order = np.fromfile(order_file, dtype="<u4")
    steps = min(len(order) // batch, epochs * (len(x) // batch))
    adam = KerasAdam(flat(layers), lr, b1, b2)
    rate = lr_schedule(sched, lr, steps)
    ident = lambda t: t
    for s in range(steps):
        adam.lr = rate(s)
        ids = order[s * batch:(s + 1) * batch]
        _, _, grads = forward_backward(layers, pixels(x[ids], m),
                                       torch.from_numpy(y[ids].astype(np.int64)), ident, ls=ls)
        layers = dense_adam_step(adam, layers, grads)
    h = pixels(xt, m)
    for i, (k, b, act) in enumerate(layers):
        h = h @ k + b
        if act == "relu":
            h = torch.relu(h)
    lab = torch.from_numpy(yt.astype(np.int64))
    acc = float((h.argmax(1) == lab).float().mean())
    loss = float(torch.nn.functional.cross_entropy(h, lab))
    print("train: %d steps, test accuracy %.4f loss %.4f" % (steps, acc, loss))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    sub.add_parser("selftest")
    e = sub.add_parser("export-check")
    e.add_argument("run")
    e.add_argument("--data", default=DATA)
    e.add_argument("--tol", type=float, default=0.02)
    m = sub.add_parser("loss-match")
    m.add_argument("--init", required=True)
    m.add_argument("--order", required=True)
    m.add_argument("--metrics", required=True)
    m.add_argument("--data", default=DATA)
    m.add_argument("--steps", type=int, default=50)
    m.add_argument("--batch", type=int, default=128)
    m.add_argument("--lr", type=float, default=1e-3)
    m.add_argument("--lr-schedule", choices=("constant", "cosine", "linear"), default="constant",
                   help="over the run's steps, as tessera train --lr-schedule")
    m.add_argument("--tol", type=float, default=1e-3)
    m.add_argument("--array", type=int, default=16, help="the chip's N (the MXU's piece length)")
    t = sub.add_parser("train")
    t.add_argument("--init", required=True)
    t.add_argument("--order", required=True)
    t.add_argument("--data", default=DATA)
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--batch", type=int, default=128)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--lr-schedule", choices=("constant", "cosine", "linear"), default="constant",
                   help="over the run's steps, as tessera train --lr-schedule")
    t.add_argument("--beta1", type=float, default=0.9, help="Adam's beta_1")
    t.add_argument("--beta2", type=float, default=0.999, help="Adam's beta_2")
    t.add_argument("--label-smoothing", type=float, default=0.0,
                   help="as tessera train --label-smoothing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.mode == "selftest":
        return selftest()
    if a.mode == "train":
        return train(a.init, a.order, a.data, a.epochs, a.batch, a.lr, a.lr_schedule, a.beta1,
                     a.beta2, a.label_smoothing)
    if a.mode == "export-check":
        return export_check(a.run, a.data, a.tol)
    return loss_match(a.init, a.order, a.metrics, a.data, a.steps, a.batch, a.lr, a.tol, a.array,
                      a.lr_schedule)


if __name__ == "__main__":
    sys.exit(main())
