"""tf.keras.layers that the chip compiler lowers, with Keras's argument names and defaults.

An argument Keras has but the chip does not take (a value other than its default) is refused
with a ValueError naming it; an argument Keras does not have is a TypeError naming it, as in
Keras. The layer stack as a whole is checked when the model is built (docs/compiler.md,
"Supported ops").
"""
import numpy as np

from tessera._core import core


def _pair(value, what, layer):
    """An int or a pair of equal ints (the chip's kernels, strides and pools are square)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{layer}: {what}={value!r}: an int or a pair")
        if value[0] != value[1]:
            raise ValueError(f"{layer}: {what}={tuple(value)}: only square {what} are supported "
                             "on the chip")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{layer}: {what}={value!r}: a positive int")
    return int(value)


def _activation(value, layer):
    if value is None or value == "linear":
        return "linear"
    if value in ("relu", "softmax"):
        return value
    name = getattr(value, "__name__", value)
    raise ValueError(f"{layer}: activation={name!r}: the chip lowers 'relu', 'softmax' (the "
                     "last Dense) and None/'linear'")


def _input_shape(kwargs, layer):
    shape = kwargs.pop("input_shape", None)
    if shape is None:
        return None
    shape = tuple(int(s) for s in shape)
    if len(shape) == 1:  # a Dense input: (values,) as one row
        return (1, shape[0], 1)
    if len(shape) == 2:
        return (shape[0], shape[1], 1)
    if len(shape) == 3:
        return shape
    raise ValueError(f"{layer}: input_shape={shape}: (H, W, C), (H, W) or (values,)")


class Layer:
    """A layer of a Sequential model: its Keras arguments and its C++ form."""
    kind = None
    _default_names = {}

    def __init__(self, kwargs, allowed_defaults):
        layer = type(self).__name__
        self.input_shape = _input_shape(kwargs, layer)
        name = kwargs.pop("name", None)
        kwargs.pop("dtype", None)  # the chip's dtypes are fixed (bf16 operands, fp32 sums)
        kwargs.pop("trainable", None)
        for key, default in allowed_defaults.items():
            if key in kwargs:
                value = kwargs.pop(key)
                if value != default:
                    raise ValueError(f"{layer}: {key}={value!r} is not supported on the chip "
                                     f"(only {default!r})")
        if kwargs:
            raise TypeError(f"{layer}: unexpected keyword argument '{next(iter(kwargs))}'")
        if name is None:
            n = Layer._default_names.get(layer, 0)
            Layer._default_names[layer] = n + 1
            snake = "".join("_" + c.lower() if c.isupper() else c for c in layer).lstrip("_")
            name = snake if n == 0 else f"{snake}_{n}"
        self.name = name

    def _cpp(self):
        raise NotImplementedError

    def get_config(self):
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}>"


class InputLayer(Layer):
    def __init__(self, input_shape=None, shape=None, **kwargs):
        kwargs["input_shape"] = shape if shape is not None else input_shape
        kwargs.pop("batch_size", None)
        super().__init__(kwargs, {})


def Input(shape=None, batch_size=None, name=None, dtype=None, **kwargs):  # noqa: N802
    """keras.Input(shape=(28, 28, 1)) as the first entry of a Sequential list."""
    return InputLayer(shape=shape, name=name, **kwargs)


class Conv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", activation=None,
                 **kwargs):
        super().__init__(kwargs, {"data_format": None, "dilation_rate": (1, 1), "groups": 1,
                                  "use_bias": True, "kernel_initializer": "glorot_uniform",
                                  "bias_initializer": "zeros", "kernel_regularizer": None,
                                  "bias_regularizer": None, "activity_regularizer": None,
                                  "kernel_constraint": None, "bias_constraint": None})
        if isinstance(filters, bool) or not isinstance(filters, (int, np.integer)) or filters < 1:
            raise ValueError(f"Conv2D: filters={filters!r}: a positive int")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2D")
        self.strides = _pair(strides, "strides", "Conv2D")
        if padding not in ("valid", "same"):
            raise ValueError(f"Conv2D: padding={padding!r}: 'valid' or 'same'")
        self.padding = padding
        self.activation = _activation(activation, "Conv2D")

    def _cpp(self):
        l = core.Layer("Conv2D")
        l.units, l.size, l.strides = self.filters, self.kernel_size, self.strides
        l.activation, l.padding = self.activation, self.padding
        return l


class _Pool(Layer):
    kind = None

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", **kwargs):
        super().__init__(kwargs, {"data_format": None})
        layer = type(self).__name__
        self.pool_size = _pair(pool_size, "pool_size", layer)
        self.strides = None if strides is None else _pair(strides, "strides", layer)
        if padding != "valid":
            raise ValueError(f"{layer}: padding={padding!r} is not supported on the chip "
                             "(only 'valid')")
        self.padding = padding

    def _cpp(self):
        l = core.Layer(self.kind)
        l.size = self.pool_size
        l.strides = self.strides or 0
        return l


class MaxPooling2D(_Pool):
    kind = "MaxPool2D"


class AveragePooling2D(_Pool):
    kind = "AveragePool2D"


MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D


class Flatten(Layer):
    def __init__(self, **kwargs):
        super().__init__(kwargs, {"data_format": None})

    def _cpp(self):
        return core.Layer("Flatten")


class Dense(Layer):
    def __init__(self, units, activation=None, **kwargs):
        super().__init__(kwargs, {"use_bias": True, "kernel_initializer": "glorot_uniform",
                                  "bias_initializer": "zeros", "kernel_regularizer": None,
                                  "bias_regularizer": None, "activity_regularizer": None,
                                  "kernel_constraint": None, "bias_constraint": None})
        if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 1:
            raise ValueError(f"Dense: units={units!r}: a positive int")
        self.units = int(units)
        self.activation = _activation(activation, "Dense")

    def _cpp(self):
        l = core.Layer("Dense")
        l.units = self.units
        l.activation = "" if self.activation == "linear" else self.activation
        return l


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(kwargs, {})
        if noise_shape is not None:
            raise ValueError("Dropout: noise_shape is not supported on the chip (only None)")
        if not 0 <= float(rate) < 1:
            raise ValueError(f"Dropout: rate={rate!r}: in [0, 1)")
        self.rate = float(rate)
        self.seed = None if seed is None else int(seed)

    def _cpp(self, default_seed=0):
        l = core.Layer("Dropout")
        l.rate = self.rate
        l.seed = self.seed if self.seed is not None else default_seed
        return l


class Normalization(Layer):
    """(x - mean) / sqrt(variance) with one mean and variance for all inputs, applied on the
    host as the images are staged. adapt(data) takes them from data, as Keras does."""

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(kwargs, {})
        if invert:
            raise ValueError("Normalization: invert=True is not supported on the chip")
        self.axis = axis
        self.mean = None if mean is None else self._scalar(mean, "mean")
        self.variance = None if variance is None else self._scalar(variance, "variance")

    @staticmethod
    def _scalar(v, what):
        a = np.asarray(v, dtype=np.float64).ravel()
        if a.size != 1:
            raise ValueError(f"Normalization: {what} has {a.size} values: the chip's inputs "
                             "have one channel, one statistic")
        return float(a[0])

    def adapt(self, data, batch_size=None, steps=None):
        if hasattr(data, "as_numpy_iterator"):
            data = np.concatenate([np.asarray(b[0] if isinstance(b, tuple) else b, np.float64)
                                   .ravel() for b in data])
        a = np.asarray(data, dtype=np.float64)
        if a.dtype == np.uint8 or np.asarray(data).dtype == np.uint8:
            a = a / 255.0  # uint8 images are staged as p / 255 (docs/python.md)
        self.mean, self.variance = float(a.mean()), float(a.var())

    def _cpp(self):
        if self.mean is None or self.variance is None:
            raise ValueError("Normalization: no mean and variance: pass them or call adapt()")
        l = core.Layer("Normalization")
        l.mean, l.variance = self.mean, self.variance
        return l


__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "MaxPooling2D", "MaxPool2D",
           "AveragePooling2D", "AvgPool2D", "Flatten", "Dense", "Dropout", "Normalization"]
