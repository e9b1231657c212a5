"""TensorBoard (scalars, weight and gradient histograms, the graph), ModelCheckpoint, CSVLogger,
the progress bar — each file read back independently (tests/reference/read_tfevents.py; csv;
the weights)."""
import csv
import glob
import os

import numpy as np
import pytest

import tessera
from tessera import keras
import read_tfevents

L = keras.layers


def model():
    m = keras.Sequential([L.Conv2D(4, 3, activation="relu", input_shape=(28, 28, 1)),
                          L.MaxPooling2D(), L.Flatten(), L.Dense(10, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    return m


def test_tensorboard_scalars_histograms_and_graph(tmp_path, fashion):
    (x, y), (xt, yt) = fashion
    m = model()
    tb = keras.callbacks.TensorBoard(log_dir=str(tmp_path), histogram_freq=1,
                                     update_freq="batch")
    m.fit(x[:512], y[:512], batch_size=128, epochs=2, validation_data=(xt[:128], yt[:128]),
          callbacks=[tb], verbose=0)
    [train_file] = glob.glob(str(tmp_path / "train" / "events.out.tfevents.*"))
    [val_file] = glob.glob(str(tmp_path / "validation" / "events.out.tfevents.*"))
    ev = read_tfevents.read_events(train_file)
    assert ev[0]["file_version"].startswith("brain.Event:")
    scalars = [(e["step"], t, v) for e in ev for t, v in e["values"]]
    assert [s for s, t, _ in scalars if t == "batch_loss"] == list(range(8))
    epoch_loss = [v for s, t, v in scalars if t == "epoch_loss"]
    assert epoch_loss == pytest.approx(m.history.history["loss"], rel=1e-6)
    val = [v for e in read_tfevents.read_events(val_file) for t, v in e["values"]
           if t == "epoch_loss"]
    assert val == pytest.approx(m.history.history["val_loss"], rel=1e-6)
    # histograms of the weights (the model's final ones at the last epoch) and gradients
    hist = {(e["step"], t): h for e in ev for t, h in e["histograms"].items()}
    w = m.get_weights()
    h = hist[(1, "conv2d/kernel_0")] if (1, "conv2d/kernel_0") in hist else next(
        v for (s, t), v in hist.items() if s == 1 and t.endswith("kernel_0"))
    assert h["num"] == w[0].size
    assert h["min"] == pytest.approx(float(w[0].min())) and h["max"] == pytest.approx(
        float(w[0].max()))
    assert h["sum"] == pytest.approx(float(w[0].astype(np.float64).sum()), rel=1e-6, abs=1e-9)
    assert sum(h["bucket"]) == w[0].size
    assert all(a < b for a, b in zip(h["bucket_limit"], h["bucket_limit"][1:]))
    grads = [t for (s, t) in hist if t.endswith("/gradient")]
    assert len(grads) == 4 * 2  # 4 tensors, 2 epochs
    # the graph: nodes with inputs that name nodes of the graph
    graphs = [e["graph_def"] for e in ev if e["graph_def"] is not None]
    assert len(graphs) == 1
    nodes = read_tfevents.graph_nodes(graphs[0])
    names = {n["name"] for n in nodes}
    assert len(nodes) > 10 and all(i.lstrip("^").split(":")[0] in names
                                   for n in nodes for i in n["input"])


def test_checkpoint_csv_and_resume(tmp_path, fashion):
    (x, y), _ = fashion
    m = model()
    log = tmp_path / "log.csv"
    m.fit(x[:512], y[:512], batch_size=128, epochs=2, verbose=0, callbacks=[
        keras.callbacks.ModelCheckpoint(str(tmp_path / "ck" / "e{epoch:02d}.tsr")),
        keras.callbacks.CSVLogger(str(log))])
    assert sorted(os.listdir(tmp_path / "ck")) == ["e01.tsr", "e02.tsr"]
    rows = list(csv.DictReader(open(log)))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert [float(r["loss"]) for r in rows] == pytest.approx(m.history.history["loss"])
    m2 = model()
    m2.build((None, 28, 28, 1))
    m2.load_weights(str(tmp_path / "ck" / "e02.tsr"))
    for a, b in zip(m.get_weights(), m2.get_weights()):
        assert a.tobytes() == b.tobytes()


def test_progress_bar_shows_the_chips_cycles(capsys, fashion):
    (x, y), _ = fashion
    strategy = tessera.distribute.TPUStrategy(
        tessera.distribute.cluster_resolver.TPUClusterResolver(backend="rtl", chips=1, array=4))
    with strategy.scope():
        m = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10, activation="softmax")])
        m.compile("sgd", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x[:32], y[:32], batch_size=16, epochs=1, verbose=2)
    out = capsys.readouterr().out
    assert "Epoch 1/1" in out and "2/2" in out and "cycles/step" in out and "MXU" in out
    assert m.history.step_logs[0]["cycles"] > 0
