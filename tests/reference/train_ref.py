#!/usr/bin/python3
"""Independent PyTorch reference for the model Tessera trains on its simulated chip.

Model (Keras layouts, TensorFlow NHWC):
    input 28x28x1, pixels p/255 (fp32)
    Conv2D(32, 3x3, valid, relu) -> MaxPool2D(2x2) -> Flatten -> Dense(10, softmax)
    sparse categorical cross-entropy (batch mean); accuracy = argmax == label
    Adam (Keras form), lr 1e-3, b1 0.9, b2 0.999, eps 1e-7

Parameters (raw little-endian float32 files in a weights directory):
    conv_kernel.f32   [3][3][1][32]   (HWIO)
    conv_bias.f32     [32]
    dense_kernel.f32  [5408][10]      (row = NHWC flatten index (py*13+px)*32+c)
    dense_bias.f32    [10]

The forward and backward passes are written by hand (im2col convolution, NHWC
throughout) so that --bf16 can round exactly the operands the chip rounds; the
`selftest` mode checks them against torch autograd on torch's own NCHW ops.

Only the standard library, numpy and torch are used.  See README.md.
"""

import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

H = W = 28
KH = KW = 3
CI = 1
CO = 32
CH = CW = H - KH + 1          # 26
PH = PW = CH // 2             # 13
NFEAT = PH * PW * CO          # 5408
NCLASS = 10

LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-7

PARAM_FILES = [  # (name, file, shape)
    ("conv_kernel", "conv_kernel.f32", (KH, KW, CI, CO)),
    ("conv_bias", "conv_bias.f32", (CO,)),
    ("dense_kernel", "dense_kernel.f32", (NFEAT, NCLASS)),
    ("dense_bias", "dense_bias.f32", (NCLASS,)),
]
PARAM_NAMES = [p[0] for p in PARAM_FILES]


# --------------------------------------------------------------------------
# bf16 round-to-nearest-even, by bit manipulation on the fp32 bit pattern
# --------------------------------------------------------------------------

def bf16_bits(x):
    """fp32 tensor -> int64 tensor of the 16-bit bf16 patterns (RNE; NaN kept quiet)."""
    u = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16) & 0xFFFF
    nan = torch.isnan(x)
    if bool(nan.any()):
        r = torch.where(nan, (u >> 16) | 0x0040, r)
    return r


def bf16_round(x):
    """Round an fp32 tensor to the nearest bf16 value (ties to even); result is fp32."""
    assert x.dtype == torch.float32
    r = bf16_bits(x) << 16                       # 0 .. 0xFFFF0000
    r = torch.where(r >= 0x80000000, r - 0x100000000, r)
    return r.to(torch.int32).view(torch.float32).reshape(x.shape)


def _identity(x):
    return x


# --------------------------------------------------------------------------
# IDX reader
# --------------------------------------------------------------------------

def _open_idx(path):
    with open(path, "rb") as f:
        head = f.read(2)
    return gzip.open(path, "rb") if head == b"\x1f\x8b" else open(path, "rb")


def read_idx(path, expect_magic, expect_dims_tail=()):
    """Read an IDX file (raw or gzip).  Checks the magic number (unsigned byte
    data, expected rank), the trailing dimensions and the payload size."""
    with _open_idx(path) as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError("%s: too short for an IDX header" % path)
    magic = struct.unpack(">I", data[:4])[0]
    if magic != expect_magic:
        raise ValueError("%s: magic 0x%08x, expected 0x%08x" % (path, magic, expect_magic))
    ndim = magic & 0xFF
    if (magic >> 8) & 0xFF != 0x08:
        raise ValueError("%s: data type 0x%02x is not unsigned byte" % (path, (magic >> 8) & 0xFF))
    hdr = 4 + 4 * ndim
    dims = struct.unpack(">%dI" % ndim, data[4:hdr])
    if tuple(dims[1:]) != tuple(expect_dims_tail):
        raise ValueError("%s: dims %s, expected [N]+%s" % (path, dims, list(expect_dims_tail)))
    n = int(np.prod(dims))
    if len(data) - hdr != n:
        raise ValueError("%s: payload %d bytes, header says %d" % (path, len(data) - hdr, n))
    return np.frombuffer(data, dtype=np.uint8, offset=hdr).reshape(dims)


def _find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError("%s(.gz) not found in %s" % (stem, data_dir))


def load_split(data_dir, split):
    """split 'train' or 't10k' -> (uint8 images [N,28,28], int64 labels [N])."""
    x = read_idx(_find(data_dir, "%s-images-idx3-ubyte" % split), 0x00000803, (H, W))
    y = read_idx(_find(data_dir, "%s-labels-idx1-ubyte" % split), 0x00000801, ())
    if x.shape[0] != y.shape[0]:
        raise ValueError("%s: %d images but %d labels" % (split, x.shape[0], y.shape[0]))
    if y.max() >= NCLASS:
        raise ValueError("%s: label %d out of range" % (split, y.max()))
    return x, y.astype(np.int64)


def to_input(x_u8):
    """uint8 [B,28,28] -> fp32 [B,28,28], p/255 (fp32 division)."""
    return torch.from_numpy(np.array(x_u8, dtype=np.uint8)).to(torch.float32) / 255.0


# --------------------------------------------------------------------------
# Parameters: init, load, dump
# --------------------------------------------------------------------------

def glorot_init(rng):
    """Keras glorot_uniform kernels, zero biases.  Draw order: conv kernel then
    dense kernel, each rng.uniform(-limit, limit, shape) in float64, cast to fp32."""
    fan_conv_in, fan_conv_out = KH * KW * CI, KH * KW * CO      # 9, 288
    lim_c = math.sqrt(6.0 / (fan_conv_in + fan_conv_out))
    ck = rng.uniform(-lim_c, lim_c, size=(KH, KW, CI, CO)).astype(np.float32)
    lim_d = math.sqrt(6.0 / (NFEAT + NCLASS))
    dk = rng.uniform(-lim_d, lim_d, size=(NFEAT, NCLASS)).astype(np.float32)
    return {
        "conv_kernel": torch.from_numpy(ck),
        "conv_bias": torch.zeros(CO, dtype=torch.float32),
        "dense_kernel": torch.from_numpy(dk),
        "dense_bias": torch.zeros(NCLASS, dtype=torch.float32),
    }


# The same tensors in a weight export (tessera train --dump-init / a run's weights/:
# manifest.json, "tessera-sequential-weights-1"): the Conv2D's and the Dense layer's files.
EXPORT_FILES = {"conv_kernel": "conv0_kernel.f32", "conv_bias": "conv0_bias.f32",
                "dense_kernel": "dense1_kernel.f32", "dense_bias": "dense1_bias.f32"}


def load_weights(wdir):
    p = {}
    export = os.path.exists(os.path.join(wdir, "manifest.json"))
    for name, fname, shape in PARAM_FILES:
        path = os.path.join(wdir, EXPORT_FILES[name] if export else fname)
        a = np.fromfile(path, dtype="<f4")
        if a.size != int(np.prod(shape)):
            raise ValueError("%s: %d floats, expected %d" % (path, a.size, int(np.prod(shape))))
        p[name] = torch.from_numpy(a.astype(np.float32).reshape(shape))
    return p


def dump_weights(params, wdir):
    os.makedirs(wdir, exist_ok=True)
    for name, fname, shape in PARAM_FILES:
        a = params[name].detach().cpu().numpy().astype("<f4")
        assert a.shape == shape
        a.tofile(os.path.join(wdir, fname))


# --------------------------------------------------------------------------
# Hand-written forward / backward (NHWC, im2col)
# --------------------------------------------------------------------------

def im2col(x):
    """x fp32 [B,28,28] -> patches [B*676, 9], row = (b, oy, ox), column = ky*3+kx
    (= HWIO flatten order of the kernel, CI = 1)."""
    B = x.shape[0]
    cols = F.unfold(x.reshape(B, 1, H, W), kernel_size=(KH, KW))   # [B, 9, 676]
    return cols.transpose(1, 2).reshape(B * CH * CW, KH * KW * CI)


def forward(params, x, rnd=_identity):
    """Returns (logits [B,10], cache).  rnd rounds matmul operands (identity or bf16)."""
    B = x.shape[0]
    patches = im2col(x)
    kc = params["conv_kernel"].reshape(KH * KW * CI, CO)
    z = rnd(patches) @ rnd(kc) + params["conv_bias"]                 # [B*676, 32]
    z = z.reshape(B, CH, CW, CO)
    a = torch.relu(z)
    win = a.reshape(B, PH, 2, PW, 2, CO).permute(0, 1, 3, 5, 2, 4).reshape(B, PH, PW, CO, 4)
    pooled, arg = win.max(dim=-1)                                    # first max in (dy,dx) order
    feat = pooled.reshape(B, NFEAT)                                  # (py*13+px)*32+c
    logits = rnd(feat) @ rnd(params["dense_kernel"]) + params["dense_bias"]
    return logits, (patches, z, arg, feat)


def loss_acc(logits, y):
    loss = F.cross_entropy(logits, y)                                # mean over batch
    acc = (logits.argmax(dim=1) == y).to(torch.float64).mean()
    return loss, acc


def backward(params, logits, y, cache, rnd=_identity):
    """Gradients of the batch-mean cross-entropy w.r.t. the four parameters."""
    patches, z, arg, feat = cache
    B = logits.shape[0]
    dlogits = (torch.softmax(logits, dim=1) - F.one_hot(y, NCLASS).to(torch.float32)) / B
    rdl = rnd(dlogits)
    d_dk = rnd(feat).t() @ rdl
    d_db = rdl.sum(dim=0)
    dfeat = rdl @ rnd(params["dense_kernel"]).t()                    # [B, 5408]
    dpool = dfeat.reshape(B, PH, PW, CO, 1)
    dwin = torch.zeros(B, PH, PW, CO, 4, dtype=torch.float32)
    dwin.scatter_(-1, arg.unsqueeze(-1), dpool)
    da = dwin.reshape(B, PH, PW, CO, 2, 2).permute(0, 1, 4, 2, 5, 3).reshape(B, CH, CW, CO)
    dz = torch.where(z > 0, da, torch.zeros_like(da)).reshape(B * CH * CW, CO)
    rdz = rnd(dz)
    d_ck = (rnd(patches).t() @ rdz).reshape(KH, KW, CI, CO)
    d_cb = rdz.sum(dim=0)
    return {"conv_kernel": d_ck, "conv_bias": d_cb, "dense_kernel": d_dk, "dense_bias": d_db}


# --------------------------------------------------------------------------
# Adam, Keras form
# --------------------------------------------------------------------------

class KerasAdam:
    """t += 1; lr_t = lr*sqrt(1-b2^t)/(1-b1^t)  (float64, rounded once to fp32)
    m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; w -= lr_t*m/(sqrt(v)+eps)  (fp32)"""

    def __init__(self, params, lr=LR, b1=B1, b2=B2, eps=EPS):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.t = 0
        self.m = {k: torch.zeros_like(v) for k, v in params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in params.items()}

    def step(self, params, grads):
        self.t += 1
        lr_t = float(np.float32(self.lr * math.sqrt(1.0 - self.b2 ** self.t) / (1.0 - self.b1 ** self.t)))
        b1, b2 = float(np.float32(self.b1)), float(np.float32(self.b2))
        c1, c2 = float(np.float32(1.0 - self.b1)), float(np.float32(1.0 - self.b2))
        eps = float(np.float32(self.eps))
        for k in PARAM_NAMES:
            g = grads[k]
            self.m[k] = b1 * self.m[k] + c1 * g
            self.v[k] = b2 * self.v[k] + c2 * (g * g)
            params[k] = params[k] - lr_t * self.m[k] / (torch.sqrt(self.v[k]) + eps)


def train_step(params, opt, x, y, rnd):
    logits, cache = forward(params, x, rnd)
    loss, acc = loss_acc(logits, y)
    grads = backward(params, logits, y, cache, rnd)
    opt.step(params, grads)
    return float(loss), float(acc)


def evaluate(params, x_u8, y, rnd, batch=1000):
    tot_loss, correct = 0.0, 0
    for i in range(0, x_u8.shape[0], batch):
        xb = to_input(x_u8[i:i + batch])
        yb = torch.from_numpy(y[i:i + batch])
        logits, _ = forward(params, xb, rnd)
        tot_loss += float(F.cross_entropy(logits, yb, reduction="sum").double())
        correct += int((logits.argmax(dim=1) == yb).sum())
    n = x_u8.shape[0]
    return tot_loss / n, correct / n


# --------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------

def cmd_replay(a):
    torch.set_num_threads(a.threads)
    rng_needed = a.dump_init is not None
    if rng_needed:
        if a.seed is None:
            sys.exit("--dump-init needs --seed")
        dump_weights(glorot_init(np.random.Generator(np.random.PCG64(a.seed))), a.dump_init)
        print("wrote glorot init (seed %d) to %s" % (a.seed, a.dump_init))
        if a.weights is None:
            return
    for req in ("data", "weights", "order", "batch", "steps", "out"):
        if getattr(a, req) is None:
            sys.exit("replay needs --%s" % req)
    rnd = bf16_round if a.bf16 else _identity
    x_u8, y = load_split(a.data, "train")
    params = load_weights(a.weights)
    order = np.fromfile(a.order, dtype="<u4").astype(np.int64)
    need = a.steps * a.batch
    if order.size < need:
        sys.exit("%s: %d indices, need steps*batch = %d" % (a.order, order.size, need))
    if order[:need].max(initial=0) >= x_u8.shape[0]:
        sys.exit("%s: index out of range (train set has %d)" % (a.order, x_u8.shape[0]))
    opt = KerasAdam(params)
    with open(a.out, "w") as f:
        f.write("step,loss,accuracy\n")
        for s in range(a.steps):
            idx = order[s * a.batch:(s + 1) * a.batch]
            loss, acc = train_step(params, opt, to_input(x_u8[idx]), torch.from_numpy(y[idx]), rnd)
            f.write("%d,%.9g,%.9g\n" % (s, loss, acc))
    if a.final_weights:
        dump_weights(params, a.final_weights)
    print("replay: %d steps of %d, bf16=%s, last loss %.9g -> %s" % (a.steps, a.batch, a.bf16, loss, a.out))


def cmd_full(a):
    torch.set_num_threads(a.threads)
    rnd = bf16_round if a.bf16 else _identity
    x_tr, y_tr = load_split(a.data, "train")
    x_te, y_te = load_split(a.data, "t10k")
    rng = np.random.Generator(np.random.PCG64(a.seed))
    params = glorot_init(rng)
    opt = KerasAdam(params)
    n = x_tr.shape[0]
    hist = []
    for ep in range(a.epochs):
        t0 = time.time()
        perm = rng.permutation(n)
        tl, tc = 0.0, 0.0
        for i in range(0, n, a.batch):                 # last partial batch included, as Keras
            idx = perm[i:i + a.batch]
            loss, acc = train_step(params, opt, to_input(x_tr[idx]), torch.from_numpy(y_tr[idx]), rnd)
            tl += loss * len(idx)
            tc += acc * len(idx)
        te_loss, te_acc = evaluate(params, x_te, y_te, rnd)
        rec = {"epoch": ep + 1, "train_loss": tl / n, "train_accuracy": tc / n,
               "test_loss": te_loss, "test_accuracy": te_acc, "seconds": round(time.time() - t0, 1)}
        hist.append(rec)
        print("epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f (%.1fs)"
              % (ep + 1, rec["train_loss"], rec["train_accuracy"], te_loss, te_acc, rec["seconds"]),
              flush=True)
    print(json.dumps({"seed": a.seed, "batch": a.batch, "bf16": a.bf16, "epochs": hist}))


def _torch_reference_loss(params, x, y):
    """Same model with torch's own NCHW ops and autograd (layout conversions included)."""
    B = x.shape[0]
    k = params["conv_kernel"].permute(3, 2, 0, 1)                  # HWIO -> OIHW
    z = F.conv2d(x.reshape(B, 1, H, W), k, params["conv_bias"])    # [B,32,26,26]
    p = F.max_pool2d(torch.relu(z), 2)                             # [B,32,13,13]
    feat = p.permute(0, 2, 3, 1).reshape(B, NFEAT)                 # NHWC flatten
    logits = feat @ params["dense_kernel"] + params["dense_bias"]
    return F.cross_entropy(logits, y), logits


class _RoundedAffine(torch.autograd.Function):
    """a @ w + b with bf16-rounded operands in forward and backward (selftest only)."""

    @staticmethod
    def forward(ctx, a, w, b):
        ctx.save_for_backward(a, w)
        return bf16_round(a) @ bf16_round(w) + b

    @staticmethod
    def backward(ctx, g):
        a, w = ctx.saved_tensors
        rg = bf16_round(g.contiguous())
        return rg @ bf16_round(w).t(), bf16_round(a).t() @ rg, rg.sum(dim=0)


def _torch_bf16_reference_loss(params, x, y):
    """bf16-emulating model via autograd: torch max_pool2d/relu, NCHW pooling."""
    B = x.shape[0]
    kc = params["conv_kernel"].reshape(KH * KW * CI, CO)
    z = _RoundedAffine.apply(im2col(x), kc, params["conv_bias"]).reshape(B, CH, CW, CO)
    p = F.max_pool2d(torch.relu(z).permute(0, 3, 1, 2), 2)          # NCHW pool
    feat = p.permute(0, 2, 3, 1).reshape(B, NFEAT)
    logits = _RoundedAffine.apply(feat, params["dense_kernel"], params["dense_bias"])
    return F.cross_entropy(logits, y), logits


def cmd_selftest(a):
    torch.set_num_threads(a.threads)
    ok = True

    def check(name, cond, detail=""):
        nonlocal ok
        ok &= bool(cond)
        print("%-4s %s %s" % ("ok" if cond else "FAIL", name, detail))

    # (b) bf16 rounding on known values
    one = 1.0
    cases = [
        (1.0, 0x3F80), (-1.0, 0xBF80), (0.0, 0x0000), (-0.0, 0x8000),
        (one + 2 ** -8, 0x3F80),            # tie, even stays
        (one + 3 * 2 ** -8, 0x3F82),        # tie, odd rounds up
        (one + 2 ** -8 + 2 ** -20, 0x3F81),  # just above the tie
        (one + 2 ** -7, 0x3F81),            # exact
        (3.140625, 0x4049), (math.pi, 0x4049), (-2.0, 0xC000),
        (float("inf"), 0x7F80), (float("-inf"), 0xFF80),
        (3.4028234663852886e38, 0x7F80),    # FLT_MAX rounds to inf
        (1e-40, 0x0001),                    # subnormal 0x000116C2 -> 0x0001
    ]
    xs = torch.tensor([c[0] for c in cases], dtype=torch.float32)
    got = bf16_bits(xs).tolist()
    bad = [(c[0], hex(g), hex(c[1])) for c, g in zip(cases, got) if g != c[1]]
    check("bf16 RNE known values (%d)" % len(cases), not bad, str(bad) if bad else "")
    nanb = int(bf16_bits(torch.tensor([float("nan")]))[0])
    check("bf16 NaN stays NaN", (nanb & 0x7F80) == 0x7F80 and (nanb & 0x7F) != 0, hex(nanb))
    r = torch.randn(100000) * 10.0 ** torch.randint(-20, 20, (100000,)).float()
    rr = bf16_round(r)
    check("bf16_round low 16 bits zero", bool(((rr.view(torch.int32) & 0xFFFF) == 0).all()))
    relerr = ((rr - r).abs() / r.abs()).max().item()
    check("bf16_round rel err <= 2^-8 (half ulp)", relerr <= 2 ** -8, "%.3g" % relerr)
    same_torch = torch.equal(rr, r.to(torch.bfloat16).to(torch.float32))
    print("info torch.bfloat16 cast agrees with bit-level RNE on 1e5 randoms: %s" % same_torch)

    # (a) hand-written forward/backward vs torch autograd (fp32)
    g = torch.Generator().manual_seed(1234)
    params = glorot_init(np.random.Generator(np.random.PCG64(7)))
    params["conv_bias"] = torch.randn(CO, generator=g) * 0.05
    params["dense_bias"] = torch.randn(NCLASS, generator=g) * 0.05
    B = 16
    x = (torch.randint(0, 256, (B, H, W), generator=g).to(torch.float32)) / 255.0
    y = torch.randint(0, NCLASS, (B,), generator=g)
    logits, cache = forward(params, x)
    loss, _ = loss_acc(logits, y)
    grads = backward(params, logits, y, cache)
    tp = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    tloss, tlogits = _torch_reference_loss(tp, x, y)
    tloss.backward()
    check("forward logits vs torch NCHW ops",
          torch.allclose(logits, tlogits.detach(), rtol=1e-5, atol=1e-5),
          "max abs diff %.3g" % (logits - tlogits.detach()).abs().max().item())
    check("loss vs torch", abs(float(loss) - float(tloss)) <= 1e-5 * abs(float(tloss)),
          "%.9g vs %.9g" % (float(loss), float(tloss)))
    for k in PARAM_NAMES:
        ref = tp[k].grad
        rel = ((grads[k] - ref).abs().max() / ref.abs().max()).item()
        check("grad %-12s vs autograd" % k, rel < 1e-5, "max rel err %.3g" % rel)

    # bf16 mode: the hand-written backward against autograd through custom
    # Functions that round the operands of every forward and backward matmul
    lb, cb = forward(params, x, bf16_round)
    gb = backward(params, lb, y, cb, bf16_round)
    tp = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    tloss_b, tlogits_b = _torch_bf16_reference_loss(tp, x, y)
    tloss_b.backward()
    check("bf16 logits vs autograd bf16 model",
          torch.allclose(lb, tlogits_b.detach(), rtol=1e-5, atol=1e-5),
          "max abs diff %.3g" % (lb - tlogits_b.detach()).abs().max().item())
    for k in PARAM_NAMES:
        ref = tp[k].grad
        rel = ((gb[k] - ref).abs().max() / ref.abs().max()).item()
        check("bf16 grad %-12s vs autograd" % k, rel < 1e-5, "max rel err %.3g" % rel)
    for k in PARAM_NAMES:
        rel = ((gb[k] - grads[k]).abs().max() / grads[k].abs().max()).item()
        print("info bf16 vs fp32 grad %-12s max rel diff %.3g" % (k, rel))

    # Adam: one step against torch.optim.Adam with the equivalent epsilon
    # (torch: eps_torch = eps_keras / sqrt(1-b2^t); identical maths for t = 1..3)
    pk = {k: v.clone() for k, v in params.items()}
    tw = {k: v.clone().double().requires_grad_(True) for k, v in params.items()}
    opt = KerasAdam(pk)
    maxrel = 0.0
    for t in range(1, 4):
        gr = {k: torch.randn(v.shape, generator=g) for k, v in params.items()}
        opt.step(pk, gr)
        topt = torch.optim.Adam(list(tw.values()), lr=LR, betas=(B1, B2), eps=EPS / math.sqrt(1 - B2 ** t))
        # rebuild torch state to continue from the same m, v, t
        for k, w in tw.items():
            w.grad = gr[k].double()
            if t > 1:
                topt.state[w] = {"step": torch.tensor(float(t - 1)), "exp_avg": tm[k], "exp_avg_sq": tv[k]}
        topt.step()
        tm = {k: topt.state[w]["exp_avg"] for k, w in tw.items()}
        tv = {k: topt.state[w]["exp_avg_sq"] for k, w in tw.items()}
        for k in PARAM_NAMES:
            d0 = (tw[k].detach() - params[k].double()).abs().max().item()
            d = (pk[k].double() - tw[k].detach()).abs().max().item()
            maxrel = max(maxrel, d / d0)
    check("Keras Adam vs torch.optim.Adam (eps rescaled), 3 steps", maxrel < 1e-4,
          "max rel diff of displacement %.3g" % maxrel)

    print("SELFTEST %s" % ("PASSED" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    default_data = "/usr/share/datasets/fashion-mnist"

    r = sub.add_parser("replay", help="per-step loss/accuracy for given weights and sample order")
    r.add_argument("--data", default=default_data)
    r.add_argument("--weights", help="dir with conv_kernel.f32 conv_bias.f32 dense_kernel.f32 dense_bias.f32")
    r.add_argument("--order", help="raw little-endian uint32 train indices, steps*batch of them")
    r.add_argument("--batch", type=int)
    r.add_argument("--steps", type=int)
    r.add_argument("--bf16", action="store_true", help="round every matmul operand to bf16 (RNE)")
    r.add_argument("--out", help="CSV step,loss,accuracy")
    r.add_argument("--final-weights", help="also write the weights after the last step here")
    r.add_argument("--dump-init", metavar="WDIR", help="write glorot_uniform init (needs --seed)")
    r.add_argument("--seed", type=int)
    r.add_argument("--threads", type=int, default=1)
    r.set_defaults(func=cmd_replay)

    f = sub.add_parser("full", help="train from glorot init, report test loss/accuracy per epoch")
    f.add_argument("--data", default=default_data)
    f.add_argument("--epochs", type=int, default=1)
    f.add_argument("--batch", type=int, default=128)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--bf16", action="store_true")
    f.add_argument("--threads", type=int, default=1)
    f.set_defaults(func=cmd_full)

    s = sub.add_parser("selftest", help="check backward vs autograd, bf16 rounding, Adam")
    s.add_argument("--threads", type=int, default=1)
    s.set_defaults(func=cmd_selftest)

    a = ap.parse_args(argv)
    a.func(a)


if __name__ == "__main__":
    main()
