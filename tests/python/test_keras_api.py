"""The Keras surface: arguments and defaults, errors that name the argument and leave nothing
behind, numpy round trips, predictions against the host's own forward pass."""
import os

import numpy as np
import pytest

import tessera
from tessera import keras

L = keras.layers


def small_cnn(**compile_args):
    m = keras.Sequential([L.Conv2D(8, 3, activation="relu", input_shape=(28, 28, 1)),
                          L.MaxPooling2D(), L.Flatten(), L.Dense(10, activation="softmax")])
    m.compile(**({"optimizer": "adam", "loss": "sparse_categorical_crossentropy",
                  "metrics": ["accuracy"]} | compile_args))
    return m


def test_unknown_argument_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="kernel_sise"):
        L.Conv2D(8, 3, kernel_sise=3)
    with pytest.raises(TypeError, match="unitz"):
        L.Dense(10, unitz=3)
    with pytest.raises(TypeError, match="metricz"):
        keras.Sequential([L.Dense(10)]).compile("adam", "sparse_categorical_crossentropy",
                                                metricz=["accuracy"])


def test_unsupported_values_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="dilation_rate"):
        L.Conv2D(8, 3, dilation_rate=2)
    with pytest.raises(ValueError, match="activation='tanh'"):
        L.Dense(10, activation="tanh")
    with pytest.raises(ValueError, match="kernel_size"):
        L.Conv2D(8, (3, 5))
    with pytest.raises(ValueError, match="rmsprop"):
        keras.Sequential([L.Dense(10)]).compile(loss="sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="mse"):
        keras.Sequential([L.Dense(10)]).compile("adam", "mse")
    with pytest.raises(ValueError, match="metric"):
        keras.Sequential([L.Dense(10)]).compile("adam", "sparse_categorical_crossentropy",
                                                ["precision"])


def test_a_stack_the_compiler_does_not_lower_is_refused_at_compile():
    m = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(16, activation="relu"),
                          L.Dense(10, activation="relu")])
    with pytest.raises(ValueError, match="softmax"):
        m.compile("adam", "sparse_categorical_crossentropy")


def test_bad_data_is_refused_and_nothing_is_written(tmp_path, fashion):
    (x, y), _ = fashion
    m = small_cnn()
    ckpt = tmp_path / "ckpt" / "w.tsr"
    cb = [keras.callbacks.ModelCheckpoint(str(ckpt)), keras.callbacks.CSVLogger(
        str(tmp_path / "log.csv"))]
    with pytest.raises(ValueError, match="labels"):
        m.fit(x[:256], y[:100], batch_size=64, callbacks=cb, verbose=0)
    with pytest.raises(ValueError, match="class indices"):
        m.fit(x[:256], np.full(256, 0.5), batch_size=64, callbacks=cb, verbose=0)
    with pytest.raises(ValueError, match="dtype"):
        m.fit(np.array(["a"] * 256), y[:256], batch_size=64, callbacks=cb, verbose=0)
    with pytest.raises(ValueError, match="not below the model's 10 classes"):
        m.fit(x[:256], np.full(256, 12), batch_size=64, callbacks=cb, verbose=0)
    assert not ckpt.exists() and not (tmp_path / "log.csv").exists()
    with pytest.raises(ValueError, match=r"images are \(30, 30\), the model takes \(28, 28, 1\)"):
        m2 = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10, activation="softmax")])
        m2.compile("adam", "sparse_categorical_crossentropy")
        m2.fit(np.zeros((64, 30, 30), np.uint8), np.zeros(64, np.int64), batch_size=64, verbose=0)


def test_weights_round_trip_in_keras_shapes(tmp_path):
    m = small_cnn()
    m.build((None, 28, 28, 1))
    w = m.get_weights()
    assert [a.shape for a in w] == [(3, 3, 1, 8), (8,), (13 * 13 * 8, 10), (10,)]
    assert all(a.dtype == np.float32 for a in w)
    rng = np.random.default_rng(0)
    new = [rng.standard_normal(a.shape).astype(np.float32) for a in w]
    m.set_weights(new)
    for a, b in zip(m.get_weights(), new):
        assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match=r"array 0 has shape \(3, 3, 8, 1\)"):
        m.set_weights([new[0].reshape(3, 3, 8, 1)] + new[1:])
    path = tmp_path / "w.tsr"
    m.save_weights(str(path))
    m.set_weights(w)
    m.load_weights(str(path))
    for a, b in zip(m.get_weights(), new):
        assert a.tobytes() == b.tobytes()
    other = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10, activation="softmax")])
    other.compile("adam", "sparse_categorical_crossentropy")
    other.build((None, 28, 28))
    with pytest.raises(tessera.CheckpointError, match="w.tsr"):
        other.load_weights(str(path))


def bf16(a):
    """Round fp32 to bf16 (nearest, ties to even) on the host: the chip's operand rounding."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def test_predict_matches_the_host_forward_pass_with_the_chips_rounding(fashion):
    """An MLP's softmax from predict() against numpy: bf16 operands, fp32 products summed."""
    (x, y), _ = fashion
    m = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(32, activation="relu"),
                          L.Dense(10, activation="softmax")])
    m.compile("sgd", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x[:512], y[:512], batch_size=128, verbose=0)
    p = m.predict(x[:64], batch_size=64)
    assert p.shape == (64, 10) and p.dtype == np.float32
    w0, b0, w1, b1 = m.get_weights()
    h = bf16(x[:64].reshape(64, -1).astype(np.float32) / 255) .astype(np.float64) @ \
        bf16(w0).astype(np.float64) + b0
    h = np.maximum(h, 0)
    z = bf16(h.astype(np.float32)).astype(np.float64) @ bf16(w1).astype(np.float64) + b1
    ref = np.exp(z - z.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(p, ref, rtol=1e-4, atol=1e-6)


def test_float_inputs_are_values_and_uint8_are_pixels(fashion):
    (x, y), _ = fashion
    m = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.build((None, 28, 28))
    assert np.array_equal(m.predict(x[:32]), m.predict(x[:32].astype(np.float32) / 255))


def test_summary_lists_layers_and_the_chip(capsys):
    m = small_cnn()
    m.build((None, 28, 28, 1))
    m.summary()
    out = capsys.readouterr().out
    assert "Conv2D" in out and "Total params: 13610" in out and "instructions" in out


def test_step_report_has_every_units_bound_and_the_roofline():
    m = small_cnn()
    m.build((None, 28, 28, 1))
    r = m.step_report()
    units = {"mxu_bound": "MXU", "vpu": "VPU", "dma_bound": "DMA", "hbm_bound": "HBM",
             "ici_bound": "ICI", "seq_bound": "SEQ"}
    total = 0
    for ph in r["phases"]:
        bounds = {k: ph[k] for k in units}
        assert ph["roofline"] == max(bounds.values()), ph
        assert bounds[next(k for k in units if units[k] == ph["binds"])] == ph["roofline"], ph
        assert ph["vpu"] <= ph["seq_bound"], ph  # the decoder takes the VPU's instructions too
        total += ph["roofline"]
    assert r["bound_cycles"] == total
    assert r["vpu_bound_cycles"] == sum(ph["vpu"] for ph in r["phases"])


def test_evaluate_and_history_keys(fashion):
    (x, y), (xt, yt) = fashion
    m = small_cnn()
    h = m.fit(x[:512], y[:512], batch_size=128, epochs=2, validation_data=(xt[:256], yt[:256]),
              verbose=0)
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert h.epoch == [0, 1] and len(h.history["loss"]) == 2
    loss, acc = m.evaluate(xt[:256], yt[:256], batch_size=128, verbose=0)
    assert loss == pytest.approx(h.history["val_loss"][1]) and 0 <= acc <= 1
    assert m.evaluate(xt[:256], yt[:256], batch_size=64, verbose=0, return_dict=True)[
        "loss"] == pytest.approx(loss, rel=1e-6)


def test_sampled_backend_checks_steps_on_the_rtl_chip(fashion):
    """backend='sampled': functional steps, every sample_every-th also on the rtl chip, checked
    bit-identical; the checked steps report the rtl chip's cycles."""
    (x, y), _ = fashion
    strategy = tessera.distribute.TPUStrategy(tessera.distribute.cluster_resolver.
                                              TPUClusterResolver(tpu="backend=sampled,chips=1,"
                                                                 "array=4,sample_every=2"))
    with strategy.scope():
        m = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10, activation="softmax")])
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x[:64], y[:64], batch_size=16, epochs=1, verbose=0)
    cycles = [s["cycles"] for s in m.history.step_logs]
    assert cycles[0] > 0 and cycles[1] == 0 and cycles[2] == cycles[0] and cycles[3] == 0


def test_the_chip_step_releases_the_gil(fashion):
    """Another Python thread runs while a step is on the chip (a prefetching Dataset does)."""
    import threading
    import time
    (x, y), _ = fashion
    m = small_cnn()
    m.fit(x[:128], y[:128], batch_size=128, verbose=0)  # compiled
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    t0 = time.perf_counter()
    m._cpp.train_on_batch(x[:128].reshape(128, -1), y[:128].astype(np.int64))
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [v for v in ticks if t0 < v < t1]
    # the step takes tens of milliseconds; with the GIL held the thread could not tick in it
    assert len(inside) >= 5, (len(inside), t1 - t0)


def test_count_params_and_no_functional_models():
    m = small_cnn()
    m.build((None, 28, 28, 1))
    assert m.count_params() == 13610
    with pytest.raises(ValueError, match="Sequential"):
        keras.Model(inputs=None, outputs=None)
