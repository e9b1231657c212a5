"""Under mpirun each rank simulates one chip of the ring (docs/multichip.md): a Python program
run with `mpirun -np 2` trains to the same weights, bit for bit, as the same model on a
threaded ring of two rtl chips in one process; only rank 0 prints."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tessera
from conftest import BUILD, ROOT

SCRIPT = """
import sys
sys.path[:0] = {paths!r}
import numpy as np
import tessera as tf
(x, y), _ = tf.keras.datasets.fashion_mnist.load_data()
tf.keras.utils.set_random_seed(4)
resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="backend=rtl,array=4")
strategy = tf.distribute.TPUStrategy(resolver)
with strategy.scope():
    m = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                             tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(10, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
m.fit(x[:64], y[:64], batch_size=16, epochs=1, steps_per_epoch=2, verbose=2)
w = m.get_weights()  # collective: every rank calls it
sys.stdout.write(f"replicas {{strategy.num_replicas_in_sync}}\\n")  # one write: ranks interleave
sys.stdout.flush()
if resolver.task_id == 0:
    np.savez(sys.argv[1], *w)
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="openmpi-bin is in make sim's packages")
def test_mpirun_ranks_train_as_the_threaded_ring(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT.format(paths=[os.path.join(ROOT, "python"),
                                           os.path.join(BUILD, "python")]))
    out = tmp_path / "w.npz"
    r = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                        sys.executable, str(script), str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("replicas 2") == 2  # each rank built the 2-replica model
    assert r.stdout.count("Epoch 1/1") == 1   # only rank 0 prints the progress
    got = np.load(out)
    (x, y), _ = tessera.keras.datasets.fashion_mnist.load_data()
    tessera.keras.utils.set_random_seed(4)
    strategy = tessera.distribute.TPUStrategy(
        tessera.distribute.cluster_resolver.TPUClusterResolver(backend="rtl", chips=2, array=4))
    with strategy.scope():
        m = tessera.keras.Sequential([tessera.keras.layers.Flatten(input_shape=(28, 28)),
                                      tessera.keras.layers.Dense(16, activation="relu"),
                                      tessera.keras.layers.Dense(10, activation="softmax")])
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x[:64], y[:64], batch_size=16, epochs=1, steps_per_epoch=2, verbose=0)
    for i, w in enumerate(m.get_weights()):
        assert got[f"arr_{i}"].tobytes() == w.tobytes()
