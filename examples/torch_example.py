# A CNN written in PyTorch, trained on the simulated chip, and handed back to PyTorch
# (tessera.torch, docs in python/tessera/torch.py).
#
#   make python                                   # once: builds the extension, sets the path
#   /usr/bin/python3 examples/torch_example.py [--steps 300] [--batch 64]
#
# The chips come from TESSERA_TPU as for any tessera program (default here: one functional
# chip, N = 16); e.g. TESSERA_TPU=backend=functional,chips=2 trains data-parallel on two, and
# TESSERA_TPU=backend=rtl,chips=1,array=16,arith=host on the cycle-accurate chip (slow).
#
# The steps: the model is defined and initialized by PyTorch; tessera.torch.from_module converts
# it (weights included) into a tessera.keras model built in the strategy's scope; fit() trains
# it on the chip on Fashion-MNIST; evaluate() measures it on the chip; to_module() exports the
# trained weights into a fresh nn.Sequential, which PyTorch evaluates in fp32 on the same test
# images. The two accuracies differ only where the chip's bf16 operands flip a prediction.
import argparse
import os
import time

import numpy as np
import torch
from torch import nn

import tessera

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--steps", type=int, default=300, help="training steps (batches)")
parser.add_argument("--batch", type=int, default=64, help="global batch")
parser.add_argument("--test", type=int, default=2000, help="test images evaluated")
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

# ---- the model, in PyTorch --------------------------------------------------------------------
torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 28x28 -> 14x14x16
    nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),             # -> 12x12x32 -> 6x6x32
    nn.Flatten(),
    nn.Linear(32 * 6 * 6, 64), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(64, 10),                                            # logits: CrossEntropyLoss
)
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()

# ---- the data: Keras's arrays (uint8 pixels); the chip takes NHWC, PyTorch NCHW ---------------
(x_train, y_train), (x_test, y_test) = tessera.keras.datasets.fashion_mnist.load_data()
x_test, y_test = x_test[:args.test], y_test[:args.test]


def nhwc(x_u8):
    return x_u8[..., None]  # (n, 28, 28, 1) uint8: the chip stages p / 255 as bf16


def nchw(x_u8):
    return torch.from_numpy(x_u8[:, None].astype(np.float32) / 255)


# ---- onto the chip ----------------------------------------------------------------------------
resolver = tessera.distribute.cluster_resolver.TPUClusterResolver(
    tpu=os.environ.get("TESSERA_TPU") or "backend=functional,chips=1,array=16")
strategy = tessera.distribute.TPUStrategy(resolver)
with strategy.scope():
    model = tessera.torch.from_module(net, input_shape=(1, 28, 28), optimizer=optimizer,
                                      loss=loss_fn)
model.summary()
print(f"chips: {strategy}")

steps_per_epoch = len(y_train) // args.batch
epochs = -(-args.steps // steps_per_epoch)
start = time.time()
model.fit(nhwc(x_train), y_train, batch_size=args.batch, epochs=epochs,
          steps_per_epoch=min(args.steps, steps_per_epoch), verbose=2)
print(f"trained {args.steps} steps of batch {args.batch} in {time.time() - start:.1f} s")

chip_loss, chip_acc = model.evaluate(nhwc(x_test), y_test, batch_size=500, verbose=0)

# ---- back to PyTorch --------------------------------------------------------------------------
trained = tessera.torch.to_module(model)  # eval mode; ends on the logits, as `net` did
with torch.no_grad():
    logits = trained(nchw(x_test))
    torch_loss = float(loss_fn(logits, torch.from_numpy(y_test.astype(np.int64))))
    torch_acc = float((logits.argmax(1).numpy() == y_test).mean())
    p_chip = model.predict(nhwc(x_test), batch_size=500)
    agree = float((p_chip.argmax(1) == logits.argmax(1).numpy()).mean())

print(f"test accuracy on the chip     {chip_acc:.4f}  (loss {chip_loss:.4f})")
print(f"test accuracy in PyTorch fp32 {torch_acc:.4f}  (loss {torch_loss:.4f})")
print(f"the two agree on {100 * agree:.2f}% of the {len(y_test)} test predictions")
