"""make bench (Python part, docs/performance.md, "Python"): what the Python path costs over the
C++ trainer.

1. Per step: the example CNN fitted from Python (functional backend, batch 128) for STEPS steps;
   each step's loop time (between consecutive on_train_batch_end calls: data, staging, the C++
   step, metrics, callbacks) against the C++ step inside it (train_on_images: staging, run,
   read-back) and against `tessera train`'s median step (metrics.csv wall_seconds), REPS
   alternating runs of each. Medians; the ratios are the overhead.
2. Throughput: images per wall second of `fit` over a tessera.data pipeline
   (from_tensor_slices -> shuffle -> batch -> prefetch) against `tessera train` on the rtl chip
   (N = 16, host-arithmetic build), RTL_STEPS steps each, REPS alternating repetitions, medians.
Usage: python_overhead.py OUT_JSON TESSERA_BIN [STEPS] [RTL_STEPS] [REPS]
"""
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

out_json, tessera_bin = sys.argv[1], sys.argv[2]
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 40
RTL_STEPS = int(sys.argv[4]) if len(sys.argv) > 4 else 4
REPS = int(sys.argv[5]) if len(sys.argv) > 5 else 3

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import keras  # noqa: E402

(x, y), _ = keras.datasets.fashion_mnist.load_data()


def cnn():
    m = keras.Sequential([keras.layers.Conv2D(32, 3, activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Flatten(),
                          keras.layers.Dense(10, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    return m


class Clock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.ends = [time.perf_counter()]

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.end = time.perf_counter()


def cpp_train(*args):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([tessera_bin, "train", "--out", d, "--no-progress", "--eval-samples",
                        "128", "--seed", "1", *args], check=True, capture_output=True)
        with open(os.path.join(d, "metrics.csv")) as f:
            steps = [float(r["wall_seconds"]) for r in csv.DictReader(f)]
        summary = json.load(open(os.path.join(d, "summary.json")))
    return steps, summary


results = []
# ---- 1. per-step overhead, functional backend (REPS alternating runs, medians) ----
loops, inners, cpps = [], [], []
for rep in range(REPS):
    keras.utils.set_random_seed(1)
    m = cnn()
    clock = Clock()
    m.fit(x, y, batch_size=128, epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[clock])
    loops.append(statistics.median(np.diff(clock.ends)[1:]))  # (step 0 compiles the program)
    inners.append(statistics.median([s["wall_seconds"] for s in m.history.step_logs][1:]))
    cpp_steps, _ = cpp_train("--backend", "functional", "--batch", "128", "--steps", str(STEPS))
    cpps.append(statistics.median(cpp_steps[1:]))
    print(f"rep {rep}: python loop {loops[-1] * 1e3:.2f} ms/step (its C++ step "
          f"{inners[-1] * 1e3:.2f} ms), tessera train {cpps[-1] * 1e3:.2f} ms/step")
py_med, inner_med, cpp_med = (statistics.median(v) for v in (loops, inners, cpps))
over_inner = statistics.median([a / b - 1 for a, b in zip(loops, inners)])
# each python run against the tessera train run beside it: the host's load moves both alike
over_cpp = statistics.median([a / b - 1 for a, b in zip(loops, cpps)])
results += [
    {"name": "python_step_loop_median", "value": py_med, "unit": "s",
     "params": {"backend": "functional", "batch": 128, "steps": STEPS, "reps": REPS}},
    {"name": "python_cpp_step_median", "value": inner_med, "unit": "s"},
    {"name": "tessera_train_step_median", "value": cpp_med, "unit": "s"},
    {"name": "python_overhead_vs_inner_step", "value": over_inner, "unit": "ratio"},
    {"name": "python_overhead_vs_tessera_train", "value": over_cpp, "unit": "ratio",
     "params": {"statistic": "median over the alternated pairs"}},
]
print(f"per step (functional, batch 128, {STEPS} steps x {REPS}): python loop "
      f"{py_med * 1e3:.2f} ms, its C++ step {inner_med * 1e3:.2f} ms, tessera train "
      f"{cpp_med * 1e3:.2f} ms; overhead {100 * over_inner:.2f}% over its own step, "
      f"{100 * over_cpp:.2f}% over tessera train (median of the pairs)")

# ---- 2. images per wall second, Dataset pipeline vs tessera train, rtl ----
resolver = tessera.distribute.cluster_resolver.TPUClusterResolver(
    backend="rtl", chips=1, array=16, arith="host")
py_ips, cpp_ips = [], []
for rep in range(REPS):
    keras.utils.set_random_seed(1)
    with tessera.distribute.TPUStrategy(resolver).scope():
        m = cnn()
    ds = tessera.data.Dataset.from_tensor_slices((x, y)).shuffle(60000, seed=1).batch(
        128, drop_remainder=True).prefetch(tessera.data.AUTOTUNE)
    clock = Clock()
    m.fit(ds, epochs=1, steps_per_epoch=RTL_STEPS + 1, verbose=0, callbacks=[clock])
    # steady state: from the end of the first step (compiling, first touch) to the last
    py_ips.append(RTL_STEPS * 128 / (clock.ends[-1] - clock.ends[1]))
    steps, summary = cpp_train("--backend", "rtl", "--arith", "host", "--array", "16",
                               "--batch", "128", "--steps", str(RTL_STEPS + 1),
                               "--eval-backend", "functional")
    cpp_ips.append(128 / statistics.median(steps[1:]))
    py_step = (clock.ends[-1] - clock.ends[1]) / RTL_STEPS
    print(f"rep {rep}: python {py_ips[-1]:.2f} images/s ({py_step:.3f} s/step), tessera train "
          f"{cpp_ips[-1]:.2f} images/s ({statistics.median(steps[1:]):.3f} s/step)")
pm, cm = statistics.median(py_ips), statistics.median(cpp_ips)
pair = statistics.median([a / b for a, b in zip(py_ips, cpp_ips)])
results += [
    {"name": "python_dataset_images_per_s", "value": pm, "unit": "images/s",
     "params": {"backend": "rtl", "arith": "host", "steps": RTL_STEPS, "reps": REPS}},
    {"name": "tessera_train_images_per_s", "value": cm, "unit": "images/s"},
    {"name": "python_over_cpp_images_per_s", "value": pair, "unit": "ratio",
     "params": {"statistic": "median over the alternated pairs"}},
]
print(f"images/s (rtl N=16 host arith, batch 128): python Dataset {pm:.2f}, tessera train "
      f"{cm:.2f}, ratio {pair:.3f} (median of the pairs)")
json.dump(results, open(out_json, "w"), indent=1)
