#!/usr/bin/python3
"""Evaluates weights on the Fashion-MNIST test set with the PyTorch reference model (fp32).

    eval_weights.py WEIGHTS [--data DIR]

WEIGHTS is a tessera checkpoint (checkpoint/ckpt.tsr: the format of docs/training.md, read
here independently of the C++ reader) or a directory of raw little-endian fp32 files
(conv_kernel.f32, conv_bias.f32, dense_kernel.f32, dense_bias.f32, as train_ref.py writes them).
Prints one line: test_loss test_accuracy."""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_ref  # noqa: E402


def read_checkpoint(path):
    b = open(path, "rb").read()
    if b[:8] != b"TSRCKPT1":
        sys.exit("%s: not a tessera checkpoint (magic)" % path)
    (length,) = struct.unpack_from("<Q", b, 12)
    if len(b) != 20 + length + 4:
        sys.exit("%s: %d bytes, the header says %d" % (path, len(b), 20 + length + 4))
    off = 20

    def u32():
        nonlocal off
        (v,) = struct.unpack_from("<I", b, off)
        off += 4
        return v

    def u64():
        nonlocal off
        (v,) = struct.unpack_from("<Q", b, off)
        off += 8
        return v

    def string():
        nonlocal off
        n = u32()
        s = b[off:off + n].decode()
        off += n
        return s

    string()  # model signature
    for _ in range(4):
        u64()  # step, data epoch, data index, seed
    tensors = {}
    for _ in range(u32()):
        name = string()
        dims = [u32() for _ in range(u32())]
        count = u64()
        tensors[name] = np.frombuffer(b, dtype="<f4", count=count, offset=off).reshape(dims)
        off += 4 * count
    return tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    wdir = a.weights
    if os.path.isfile(a.weights):
        t = read_checkpoint(a.weights)
        wdir = tempfile.mkdtemp()
        for k in ("conv_kernel", "conv_bias", "dense_kernel", "dense_bias"):
            t[k].astype("<f4").tofile(os.path.join(wdir, k + ".f32"))
    params = train_ref.load_weights(wdir)
    x, y = train_ref.load_split(a.data, "t10k")
    loss, acc = train_ref.evaluate(params, x, y, train_ref._identity)
    print("%.6f %.4f" % (loss, acc))


if __name__ == "__main__":
    main()
