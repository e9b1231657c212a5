"""TFRecord files: a file written here by an independent writer (struct, the CRC-32C of
tests/reference/read_tfevents.py, the Example protobuf by hand) read by tessera.data; tessera's
writer read back by that independent reader; damage named by file and offset."""
import struct

import numpy as np
import pytest

import tessera
from read_tfevents import fields, masked_crc32c, records


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    return key + (varint(len(payload)) + payload if wire == 2 else payload)


def example(image, label, packed=True):
    """tf.train.Example{features{feature{"label": int64_list}, feature{"image": bytes_list}}} with
    the map entries in reverse key order and the label unpacked when asked (both legal)."""
    if packed:
        ints = field(1, 2, varint(label))
    else:
        ints = field(1, 0, varint(label))
    label_feature = field(3, 2, ints)
    image_feature = field(1, 2, field(1, 2, image))
    entries = field(1, 2, field(1, 2, b"label") + field(2, 2, label_feature)) + \
        field(1, 2, field(1, 2, b"image") + field(2, 2, image_feature)) + \
        field(1, 2, field(1, 2, b"extra") + field(2, 2, field(2, 2, field(1, 2, struct.pack("<f", 1.5)))))
    return field(1, 2, entries)


def frame(data):
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + \
        struct.pack("<I", masked_crc32c(data))


@pytest.fixture
def independent_file(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5, 6, 6), dtype=np.uint8)
    labels = [3, 0, 9, 200, 7]
    path = tmp_path / "indep.tfrecord"
    path.write_bytes(b"".join(frame(example(img.tobytes(), int(l), packed=i % 2 == 0))
                              for i, (img, l) in enumerate(zip(images, labels))))
    return path, images, labels


def test_reads_an_independently_written_file(independent_file):
    path, images, labels = independent_file
    x, y = tessera.data.load_image_tfrecords(str(path))
    assert x.shape == (5, 6, 6) and np.array_equal(x, images) and y.tolist() == labels
    feats = {"image": tessera.io.FixedLenFeature([], tessera.string),
             "label": tessera.io.FixedLenFeature([], tessera.int64)}

    def parse(record):
        ex = tessera.io.parse_single_example(record, feats)
        return tessera.reshape(tessera.io.decode_raw(ex["image"], tessera.uint8), (6, 6)), \
            ex["label"]
    got = list(tessera.data.TFRecordDataset([str(path)]).map(parse))
    assert [int(l) for _, l in got] == labels
    assert all(np.array_equal(a, b) for (a, _), b in zip(got, images))
    with pytest.raises(ValueError, match="'missing' is missing"):
        tessera.io.parse_single_example(next(iter(tessera.data.TFRecordDataset(str(path)))),
                                        {"missing": tessera.io.FixedLenFeature([], tessera.int64)})


def test_tesseras_writer_read_by_this_reader(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (7, 4, 5), dtype=np.uint8)
    y = rng.integers(0, 10, 7)
    [path] = tessera.data.write_image_tfrecords(x, y, tmp_path / "w.tfrecord")
    recs = [data for _, data in records(path)]
    assert len(recs) == 7
    for rec, img, label in zip(recs, x, y):
        feature = {}
        for _, _, entry in fields(next(v for n, _, v in fields(rec) if n == 1)):
            kv = dict((n, v) for n, _, v in fields(entry))
            feature[kv[1].decode()] = kv[2]
        image_bytes = next(v for n, _, v in fields(next(v for n, _, v in
                                                          fields(feature["image"]))))
        assert image_bytes == img.tobytes()
        int64_list = next(v for n, _, v in fields(feature["label"]) if n == 3)
        packed = next(v for n, _, v in fields(int64_list) if n == 1)
        assert packed == varint(int(label))
    shards = tessera.data.write_image_tfrecords(x, y, tmp_path / "s", shards=3)
    assert [p.rsplit("/", 1)[1] for p in shards] == ["s-00000-of-00003", "s-00001-of-00003",
                                                     "s-00002-of-00003"]
    xs, ys = tessera.data.load_image_tfrecords(shards)
    assert np.array_equal(xs, x) and np.array_equal(ys, y)


def test_damage_is_named_by_file_and_offset(independent_file, tmp_path):
    path, _, _ = independent_file
    data = bytearray(path.read_bytes())
    first = 12 + struct.unpack("<Q", data[:8])[0] + 4  # the second record's offset
    data[first + 20] ^= 0x01  # a bit of the second record's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(tessera.DataError, match=rf"bad.tfrecord: offset {first:#x}"):
        tessera.data.load_image_tfrecords(str(bad))
    with pytest.raises(tessera.DataError, match=rf"bad.tfrecord: offset {first:#x}"):
        list(tessera.data.TFRecordDataset(str(bad)))
