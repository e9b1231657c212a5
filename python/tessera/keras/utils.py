"""keras.utils: the global seed (the weights' initial values, the data order, Dropout masks)."""
_seed = [0]


def set_random_seed(seed):
    """Seeds the next models' Glorot initialization and fit()'s shuffle, as `tessera train
    --seed` does: the same seed gives the C++ trainer's weights and batches."""
    _seed[0] = int(seed)


def get_random_seed():
    return _seed[0]


def to_categorical(y, num_classes=None):
    import numpy as np
    y = np.asarray(y, dtype=np.int64).ravel()
    n = int(num_classes or (y.max() + 1))
    out = np.zeros((y.size, n), np.float32)
    out[np.arange(y.size), y] = 1
    return out
