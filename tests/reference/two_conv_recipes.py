#!/usr/bin/env python3
"""Training recipes for the two-conv network in fp32 PyTorch alone (its own initialisation and
shuffle; no chip): Conv2D(32, 3, relu) -> MaxPool2D -> Conv2D(64, 3, relu) -> MaxPool2D ->
Flatten -> Dense(128, relu) -> Dropout(0.5) -> Dense(10), Adam (Keras's epsilon 1e-7), batch
128, sparse categorical cross-entropy. Prints the test accuracy after each epoch. Used to look
for a recipe worth running on the chip (docs/training.md, the two-conv network's accuracy).

usage: /usr/bin/python3 tests/reference/two_conv_recipes.py [--lr 3e-3] [--sched cosine]
       [--std] [--seed 1] ...   (--help lists every option)
"""
import argparse
import copy
import gzip
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def load(data_dir, name, images):
    path = os.path.join(data_dir, name)
    gz = os.path.exists(path + ".gz")
    with (gzip.open(path + ".gz", "rb") if gz else open(path, "rb")) as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=16 if images else 8)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DATA)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--sched", choices=("constant", "cosine", "linear"), default="constant",
                   help="decay over the whole run (Keras CosineDecay / PolynomialDecay)")
    p.add_argument("--warmup", type=int, default=0, help="linear warm-up steps")
    p.add_argument("--std", action="store_true",
                   help="standardize the inputs with the training set's mean and std")
    p.add_argument("--flip", action="store_true", help="random horizontal flips")
    p.add_argument("--shift", type=int, default=0, help="random shifts up to this many pixels")
    p.add_argument("--init", choices=("glorot", "he"), default="glorot")
    p.add_argument("--b2", type=float, default=0.999, help="Adam's beta_2")
    p.add_argument("--ema", type=float, default=0, help="evaluate an EMA of the weights")
    p.add_argument("--ls", type=float, default=0, help="label smoothing")
    p.add_argument("--sgd", type=float, default=0,
                   help="SGD with this momentum instead of Adam (the chip's --optimizer sgd)")
    p.add_argument("--wd", type=float, default=0,
                   help="decoupled weight decay (AdamW; Keras AdamW's weight_decay)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()

    xtr = load(a.data, "train-images-idx3-ubyte", True).reshape(-1, 1, 28, 28) / np.float32(255)
    ytr = load(a.data, "train-labels-idx1-ubyte", False).astype(np.int64)
    xte = load(a.data, "t10k-images-idx3-ubyte", True).reshape(-1, 1, 28, 28) / np.float32(255)
    yte = load(a.data, "t10k-labels-idx1-ubyte", False).astype(np.int64)
    xtr, xte = xtr.astype(np.float32), xte.astype(np.float32)
    if a.std:
        m, s = xtr.mean(), xtr.std()
        xtr, xte = (xtr - m) / s, (xte - m) / s

    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(),
                        nn.Dropout(0.5), nn.Linear(128, 10))
    for mod in net:
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            if a.init == "glorot":
                nn.init.xavier_uniform_(mod.weight)
            else:
                nn.init.kaiming_uniform_(mod.weight, nonlinearity="relu")
            nn.init.zeros_(mod.bias)
    if a.sgd:
        opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.sgd)
    elif a.wd:
        opt = torch.optim.AdamW(net.parameters(), lr=a.lr, eps=1e-7, betas=(0.9, a.b2),
                                weight_decay=a.wd)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-7, betas=(0.9, a.b2))
    ema = copy.deepcopy(net) if a.ema else None
    per_epoch = len(xtr) // a.batch
    total = per_epoch * a.epochs

    def lr_at(t):
        if t < a.warmup:
            return a.lr * (t + 1) / a.warmup
        if a.sched == "cosine":
            return a.lr * 0.5 * (1 + math.cos(math.pi * t / total))
        if a.sched == "linear":
            return a.lr * (1 - t / total)
        return a.lr

    Xtr, Ytr = torch.from_numpy(xtr), torch.from_numpy(ytr)
    step, acc = 0, 0.0
    for e in range(a.epochs):
        net.train()
        perm = rng.permutation(len(xtr))
        for i in range(per_epoch):
            idx = perm[i * a.batch:(i + 1) * a.batch]
            x, y = Xtr[idx], Ytr[idx]
            if a.flip:
                f = torch.from_numpy(rng.random(len(idx)) < 0.5)
                x = x.clone()
                x[f] = x[f].flip(-1)
            if a.shift:
                pad = F.pad(x, (a.shift,) * 4)
                dx, dy = rng.integers(0, 2 * a.shift + 1, 2)
                x = pad[:, :, dy:dy + 28, dx:dx + 28]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(net(x), y, label_smoothing=a.ls)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if ema is not None:
                with torch.no_grad():
                    for pe, pn in zip(ema.parameters(), net.parameters()):
                        pe.mul_(a.ema).add_(pn, alpha=1 - a.ema)
        model = ema if ema is not None else net
        model.eval()
        with torch.no_grad():
            acc = (model(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean()
        print("epoch %d test accuracy %.4f" % (e + 1, acc), flush=True)
    print("final test accuracy %.4f" % acc)


if __name__ == "__main__":
    main()
