"""keras.datasets: Fashion-MNIST and MNIST as numpy arrays, from IDX files on disk (no
download: Debian's dataset-fashion-mnist package installs Fashion-MNIST)."""
from tessera.keras.datasets import fashion_mnist, mnist

__all__ = ["fashion_mnist", "mnist"]
