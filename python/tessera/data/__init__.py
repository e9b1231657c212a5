"""tf.data for Tessera: Dataset, AUTOTUNE, TFRecordDataset (docs/python.md, "tessera.data")."""
from tessera.data.dataset import (AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset,
                                  experimental)
from tessera.data.tfrecord import (TFRecordDataset, load_image_tfrecords,
                                   write_image_tfrecords)

__all__ = ["AUTOTUNE", "Dataset", "TFRecordDataset", "experimental", "write_image_tfrecords", "load_image_tfrecords",
           "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]
