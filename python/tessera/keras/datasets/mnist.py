"""keras.datasets.mnist.load_data(path=...): MNIST from a folder holding the four IDX files
(train-images-idx3-ubyte[.gz], ...). Keras downloads mnist.npz; here `path` names the folder
(no network), or an .npz with x_train, y_train, x_test, y_test as Keras's file has."""
import os

import numpy as np

from tessera.keras.datasets.fashion_mnist import _load


def load_data(path=None):
    path = path or os.environ.get("TESSERA_MNIST")
    if path is None:
        raise ValueError("mnist.load_data(path=...): the folder of the MNIST IDX files (or "
                         "mnist.npz); Tessera does not download")
    path = os.fspath(path)
    if path.endswith(".npz"):
        with np.load(path) as f:
            return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
    return _load(path)
