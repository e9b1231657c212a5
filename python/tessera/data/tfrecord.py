"""TFRecord files (docs/data.md, "TFRecord files"): TFRecordDataset yields each record's bytes,
as tf.data's does (parse them with tessera.io.parse_single_example); load_image_tfrecords reads
image Example files straight into arrays (C++, no per-record Python); write_image_tfrecords
converts arrays (`tessera tfrecord convert` converts IDX files)."""
import os

import numpy as np

from tessera._core import core
from tessera.data.dataset import Dataset


def _paths(filenames):
    if isinstance(filenames, (str, os.PathLike)):
        return [os.fspath(filenames)]
    if isinstance(filenames, Dataset):
        return [f.decode() if isinstance(f, bytes) else str(f) for f in filenames]
    return [os.fspath(f) for f in filenames]


class TFRecordDataset(Dataset):
    """The records of one or more TFRecord files, in order, as bytes; every record's length
    and data CRC-32C are checked (tessera.DataError names the file and the record's offset)."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        if compression_type:
            raise ValueError("TFRecordDataset: compressed files are not supported")
        paths = _paths(filenames)

        def gen():
            for p in paths:
                for data, _offset in core.read_tfrecords(p):
                    yield data
        super().__init__(gen, None)
        self.filenames = paths


def load_image_tfrecords(filenames, image_key="image", label_key="label"):
    """(images uint8 (n, H, W), labels uint8 (n,)) from image Example files: "image" raw bytes,
    "label", optional "height"/"width" (what write_image_tfrecords and `tessera tfrecord
    convert` write)."""
    return core.load_tfrecord_images(_paths(filenames), image_key, label_key)


def write_image_tfrecords(images, labels, path, shards=1):
    """One Example per sample ("image", "label", "height", "width"); with shards > 1 the files
    PATH-00000-of-0000N hold contiguous runs. Written atomically."""
    core.write_tfrecord_images(np.ascontiguousarray(images, np.uint8),
                               np.asarray(labels, np.int64), os.fspath(path), int(shards))
    return [core.tfrecord_shard_path(os.fspath(path), s, shards) for s in range(shards)]
