"""Tessera from Python: the TensorFlow program of a TPU user, run on the simulated chip.

    import tessera as tf          # in place of `import tensorflow as tf`
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')
    strategy = tf.distribute.TPUStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential([...])
        model.compile('adam', 'sparse_categorical_crossentropy', ['accuracy'])
    model.fit(dataset, epochs=1)

Every model goes through the one C++ compiler and trainer (`tessera train` runs the same); this
package is its Keras-, tf.data- and tf.distribute-shaped face. docs/python.md lists the API and
where it differs from TensorFlow.
"""
from tessera import _core
from tessera._core import CheckpointError, DataError, DeviceFault, DeviceTimeout
from tessera import chip, config, data, distribute, io, keras, tpu

float32, bfloat16, string, int64, uint8 = "float32", "bfloat16", "string", "int64", "uint8"


def reshape(tensor, shape):
    """tf.reshape on numpy arrays (for tf.data map functions)."""
    import numpy as np
    return np.reshape(tensor, shape)

__all__ = ["chip", "config", "data", "distribute", "io", "keras", "tpu", "DataError", "CheckpointError",
           "DeviceFault", "DeviceTimeout"]
__version__ = "0.1"
del _core


def __getattr__(name):
    # tessera.torch imports PyTorch, which takes seconds: only when asked for.
    if name == "torch":
        import importlib
        return importlib.import_module("tessera.torch")
    raise AttributeError("module 'tessera' has no attribute '" + name + "'")
