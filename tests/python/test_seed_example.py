"""The article's program (examples/seed_tpu_example.py) runs as written for a few steps on two
functional chips (test_callbacks.py fits on the rtl chip); Ctrl-C stops a fit between steps
with its files whole."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                                  os.path.join(BUILD, "python")]))


def run_example(tmp_path, tpu, steps):
    env = dict(ENV, TESSERA_TPU=tpu, TESSERA_STEPS=str(steps), TESSERA_LOGS=str(tmp_path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "seed_tpu_example.py")],
                       env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_seed_program_on_two_functional_chips(tmp_path):
    out = run_example(tmp_path, "backend=functional,chips=2", 4)
    assert "test accuracy" in out and "Conv2D" in out
    assert glob.glob(str(tmp_path / "tensorboard" / "train" / "events.out.tfevents.*"))
    assert os.path.exists(tmp_path / "checkpoints" / "epoch01.tsr")
    acc = float(out.split("test accuracy ")[1].split(",")[0])
    assert acc > 0.3  # four Adam steps of batch 256 are well past chance (0.1)


def test_ctrl_c_stops_fit_between_steps(tmp_path):
    script = f"""
import sys, time
sys.path[:0] = {[os.path.join(ROOT, "python"), os.path.join(BUILD, "python")]!r}
import tessera as tf
from tessera import keras
(x, y), _ = keras.datasets.fashion_mnist.load_data()
m = keras.Sequential([keras.layers.Flatten(input_shape=(28, 28)),
                      keras.layers.Dense(10, activation="softmax")])
m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
class Ready(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2:
            print("READY", flush=True)
        time.sleep(0.05)
try:
    m.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[Ready(),
          keras.callbacks.CSVLogger(r"{tmp_path}/log.csv"),
          keras.callbacks.ModelCheckpoint(r"{tmp_path}/w.tsr", save_freq=1)])
except KeyboardInterrupt:
    m2 = keras.Sequential([keras.layers.Flatten(input_shape=(28, 28)),
                           keras.layers.Dense(10, activation="softmax")])
    m2.compile("adam", "sparse_categorical_crossentropy")
    m2.build((None, 28, 28))
    m2.load_weights(r"{tmp_path}/w.tsr")
    same = all((a == b).all() for a, b in zip(m.get_weights(), m2.get_weights()))
    print("INTERRUPTED", m._cpp.step, same, flush=True)
    sys.exit(0)
print("NOT INTERRUPTED")
"""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=ENV)
    line = p.stdout.readline()
    assert line.strip() == "READY", p.stderr.read()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert "INTERRUPTED" in out, err
    _, step, same = out.split()[:3] if out.startswith("INTERRUPTED") else out.split()[-3:]
    assert int(step) >= 3 and same == "True"  # the last step's checkpoint is the model's state
    assert "interrupted after step" in err
