"""The Python path is the C++ trainer: the same model, data, seed and chips give byte-identical
weights and per-step metrics to `tessera train` (read back from its run folder by this file's
own readers: the weight export's manifest.json and raw fp32 files, metrics.csv)."""
import csv
import json
import os
import subprocess

import numpy as np
import pytest

import tessera
from conftest import TESSERA


def run_cpp(tmp_path, *args):
    out = tmp_path / "cpp_run"
    subprocess.run([TESSERA, "train", "--out", str(out), "--no-progress", *args], check=True,
                   capture_output=True, text=True)
    manifest = json.loads((out / "weights" / "manifest.json").read_text())
    weights = []
    for layer in manifest["layers"]:
        for part in ("kernel", "bias"):
            if part in layer:
                t = layer[part]
                raw = np.fromfile(out / "weights" / t["file"], dtype="<f4")
                weights.append(raw.reshape(t["shape"]))
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    return weights, rows


@pytest.mark.parametrize("chips", [1, 2])
def test_fit_matches_tessera_train(tmp_path, fashion, chips):
    (x, y), _ = fashion
    steps, batch, seed = 6, 64, 3
    weights, rows = run_cpp(tmp_path, "--backend", "functional", "--steps", str(steps),
                            "--batch", str(batch), "--seed", str(seed), "--chips", str(chips),
                            "--eval-samples", "64")
    tessera.keras.utils.set_random_seed(seed)
    strategy = tessera.distribute.TPUStrategy(
        tessera.distribute.cluster_resolver.TPUClusterResolver(backend="functional", chips=chips))
    with strategy.scope():
        model = tessera.keras.Sequential([
            tessera.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
            tessera.keras.layers.MaxPooling2D(2), tessera.keras.layers.Flatten(),
            tessera.keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    history = model.fit(x, y, batch_size=batch, epochs=1, steps_per_epoch=steps, verbose=0)
    got = model.get_weights()
    assert len(got) == len(weights)
    for a, b in zip(got, weights):
        assert a.shape == b.shape
        assert a.tobytes() == b.tobytes()  # bit for bit
    assert len(history.step_logs) == steps == len(rows)
    for logs, row in zip(history.step_logs, rows):
        assert np.float32(logs["loss"]) == np.float32(float(row["loss"]))
        assert np.float32(logs["accuracy"]) == np.float32(float(row["accuracy"]))
    # Keras's History: one entry per epoch, the epoch's mean
    assert history.history["loss"] == [pytest.approx(np.mean([float(r["loss"]) for r in rows]))]


def test_dataset_pipeline_gives_the_same_batches_as_arrays(fashion):
    """from_tensor_slices -> shuffle(n, seed) -> batch is fit(x, y)'s (and tessera train's)
    order: the same weights after a few steps."""
    (x, y), _ = fashion
    x, y = x[:2048], y[:2048]

    def model():
        m = tessera.keras.Sequential([tessera.keras.layers.Flatten(input_shape=(28, 28)),
                                      tessera.keras.layers.Dense(32, activation="relu"),
                                      tessera.keras.layers.Dense(10, activation="softmax")])
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
        return m
    tessera.keras.utils.set_random_seed(5)
    a = model()
    a.fit(x, y, batch_size=128, epochs=2, verbose=0)
    tessera.keras.utils.set_random_seed(5)
    b = model()
    ds = tessera.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=5).batch(
        128, drop_remainder=True).prefetch(tessera.data.AUTOTUNE)
    b.fit(ds, epochs=2, verbose=0)
    for p, q in zip(a.get_weights(), b.get_weights()):
        assert p.tobytes() == q.tobytes()
    assert a.history.history == b.history.history
