"""tessera.data against tf.data's documented semantics."""
import threading

import numpy as np
import pytest

import tessera
from tessera.data import AUTOTUNE, Dataset


def items(ds):
    return [e.tolist() if isinstance(e, np.ndarray) else
            tuple(x.tolist() for x in e) if isinstance(e, tuple) else int(e) for e in ds]


def test_from_tensor_slices_batch_and_drop_remainder():
    x = np.arange(10)
    assert items(Dataset.from_tensor_slices(x).batch(4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert items(Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)) == [
        [0, 1, 2, 3], [4, 5, 6, 7]]
    pairs = items(Dataset.from_tensor_slices((x, x * 2)).batch(5))
    assert pairs == [([0, 1, 2, 3, 4], [0, 2, 4, 6, 8]), ([5, 6, 7, 8, 9], [10, 12, 14, 16, 18])]
    with pytest.raises(ValueError, match="first axes differ"):
        Dataset.from_tensor_slices((x, np.arange(3)))


def test_shuffle_is_a_seeded_permutation_reshuffled_each_epoch():
    ds = Dataset.from_tensor_slices(np.arange(100)).shuffle(100, seed=7)
    a, b = items(ds), items(ds)
    assert sorted(a) == list(range(100)) and a != list(range(100)) and a != b
    again = items(Dataset.from_tensor_slices(np.arange(100)).shuffle(100, seed=7))
    assert again == a
    fixed = Dataset.from_tensor_slices(np.arange(100)).shuffle(100, seed=7,
                                                               reshuffle_each_iteration=False)
    assert items(fixed) == items(fixed)
    # a small buffer only moves elements forward by less than... its size: the first output
    # comes from the first `buffer` inputs
    small = items(Dataset.from_tensor_slices(np.arange(100)).shuffle(4, seed=1))
    assert small[0] < 4 and sorted(small) == list(range(100))
    # the same algorithm on a stream (no index arithmetic) is still a permutation
    stream = items(Dataset.range(50).map(lambda v: v).shuffle(10, seed=3))
    assert sorted(stream) == list(range(50))


def test_map_filter_cache_repeat_take_skip_shard():
    calls = []

    def f(v):
        calls.append(int(v))
        return v * 10
    ds = Dataset.range(6).map(f).cache()
    assert items(ds) == [0, 10, 20, 30, 40, 50] and items(ds) == [0, 10, 20, 30, 40, 50]
    assert len(calls) == 6  # the second pass came from the cache
    assert items(Dataset.range(10).filter(lambda v: v % 3 == 0)) == [0, 3, 6, 9]
    assert items(Dataset.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert items(Dataset.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert items(Dataset.range(10).skip(7)) == [7, 8, 9]
    assert items(Dataset.range(10).shard(3, 1)) == [1, 4, 7]
    assert Dataset.range(10).shard(3, 1).cardinality() == 3
    assert Dataset.range(3).repeat().cardinality() == tessera.data.INFINITE_CARDINALITY
    with pytest.raises(ValueError, match="index 3"):
        Dataset.range(10).shard(3, 3)
    pairs = Dataset.from_tensor_slices((np.arange(4), np.arange(4))).map(lambda a, b: (a + b, b))
    assert items(pairs) == [(0, 0), (2, 1), (4, 2), (6, 3)]


def test_prefetch_runs_ahead_on_a_thread_and_passes_errors():
    produced = []

    def slow(v):
        produced.append(threading.current_thread().name)
        return v
    ds = Dataset.range(5).map(slow).prefetch(AUTOTUNE)
    assert items(ds) == [0, 1, 2, 3, 4]
    assert all(name == "tessera.data.prefetch" for name in produced)

    def boom(v):
        if v == 2:
            raise RuntimeError("bad element 2")
        return v
    with pytest.raises(RuntimeError, match="bad element 2"):
        items(Dataset.range(5).map(boom).prefetch(2))


def test_prefetch_produces_the_next_element_while_the_consumer_holds_one():
    made = {i: threading.Event() for i in range(4)}

    def mark(v):
        made[int(v)].set()
        return v
    it = iter(Dataset.range(4).map(mark).prefetch(2))
    assert int(next(it)) == 0
    # without prefetch element 1 would be made only at the next next(); here the thread makes
    # it while this (the consumer) waits
    assert made[1].wait(timeout=10)
    assert [int(v) for v in it] == [1, 2, 3]


def test_datasets_load_data_returns_keras_arrays(fashion):
    (x, y), (xt, yt) = fashion
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8
    assert y.shape == (60000,) and y.dtype == np.uint8 and y.max() == 9
    assert xt.shape == (10000, 28, 28) and yt.shape == (10000,)


def test_load_data_names_a_bad_file(tmp_path):
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02")
    (tmp_path / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x02")
    with pytest.raises(tessera.DataError, match=r"train-images-idx3-ubyte: offset 0x"):
        tessera.keras.datasets.mnist.load_data(path=str(tmp_path))
