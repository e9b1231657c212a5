"""keras.datasets.fashion_mnist.load_data(): ((x_train, y_train), (x_test, y_test)), uint8
images (n, 28, 28) and uint8 labels, from Debian's dataset-fashion-mnist (or TESSERA_DATA)."""
import os

from tessera._core import core


def _load(path):
    train = core.load_mnist(path, "train")
    test = core.load_mnist(path, "test")
    return train, test


def load_data(path=None):
    path = path or os.environ.get("TESSERA_DATA") or core.default_data_dir()
    return _load(os.fspath(path))
