"""tf.io's record parsing for TFRecordDataset pipelines:

    features = {'image': tf.io.FixedLenFeature([], tf.string),
                'label': tf.io.FixedLenFeature([], tf.int64)}
    def parse(record):
        ex = tf.io.parse_single_example(record, features)
        return tf.reshape(tf.io.decode_raw(ex['image'], tf.uint8), (28, 28)), ex['label']
    ds = tf.data.TFRecordDataset(files).map(parse)

Values come back as numpy arrays (a per-record Python cost: for whole image files
tessera.data.load_image_tfrecords reads them in C++)."""
import numpy as np

from tessera._core import core

string, int64, float32, uint8 = "string", "int64", "float32", "uint8"


class FixedLenFeature:
    def __init__(self, shape, dtype, default_value=None):
        self.shape, self.dtype, self.default_value = list(shape), dtype, default_value


class VarLenFeature:
    def __init__(self, dtype):
        self.dtype = dtype


def parse_single_example(serialized, features):
    """The named features of one serialized tf.train.Example: FixedLenFeature([], string) gives
    bytes, FixedLenFeature([k], int64/float32) an array of k (a scalar for shape []),
    VarLenFeature an array of what is there. A missing feature without a default, or one of
    another kind or length, is a ValueError naming it."""
    got = core.decode_example(bytes(serialized))
    out = {}
    for name, spec in features.items():
        values = got.get(name)
        if values is None:
            if isinstance(spec, FixedLenFeature) and spec.default_value is not None:
                out[name] = np.asarray(spec.default_value)
                continue
            raise ValueError(f"parse_single_example: feature '{name}' is missing")
        want_bytes = spec.dtype == string
        if want_bytes != isinstance(values, list):
            raise ValueError(f"parse_single_example: feature '{name}' is not a {spec.dtype} list")
        if not want_bytes:
            values = values.astype(np.int64 if spec.dtype == int64 else np.float32)
        if isinstance(spec, FixedLenFeature):
            n = int(np.prod(spec.shape)) if spec.shape else 1
            if len(values) != n:
                raise ValueError(f"parse_single_example: feature '{name}' has {len(values)} "
                                 f"values, FixedLenFeature({spec.shape}) takes {n}")
            if want_bytes:
                values = values[0] if not spec.shape else values
            else:
                values = values.reshape(spec.shape) if spec.shape else values[0]
        out[name] = values
    return out


def decode_raw(input_bytes, out_type):
    return np.frombuffer(bytes(input_bytes), dtype=np.dtype(out_type)).copy()


def serialize_example(features):
    """{name: bytes | [bytes] | ints | floats} -> a tf.train.Example's bytes."""
    return core.encode_example({k: (v if isinstance(v, (bytes, list)) else np.atleast_1d(v))
                                for k, v in features.items()})


class TFRecordWriter:
    """tf.io.TFRecordWriter: records to PATH, made visible atomically by close() (or the end of
    a with block)."""

    def __init__(self, path, options=None):
        self._w = core.TFRecordWriter(str(path))

    def write(self, record):
        self._w.write(bytes(record))

    def close(self):
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        return False
