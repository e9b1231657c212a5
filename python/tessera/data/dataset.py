"""tf.data's Dataset over numpy arrays (docs/python.md, "tessera.data").

A Dataset is a recipe: each transformation returns a new Dataset and iterating runs the chain.
Elements are numpy arrays or tuples of them; batch() stacks them. The pipeline is deterministic
for its seeds. prefetch() runs the chain ahead on a thread while the chip computes (the step
releases the GIL), and fit() over a Dataset takes its batches as they come.
"""
import itertools
import queue
import threading

import numpy as np

from tessera._core import core

AUTOTUNE = -1
# (`tf.data.experimental.AUTOTUNE` in older programs)


class _Experimental:
    AUTOTUNE = AUTOTUNE


experimental = _Experimental()


def _structure_map(fn, element):
    if isinstance(element, tuple):
        return tuple(_structure_map(fn, e) for e in element)
    if isinstance(element, dict):
        return {k: _structure_map(fn, v) for k, v in element.items()}
    return fn(element)


def _stack(elements):
    first = elements[0]
    if isinstance(first, tuple):
        return tuple(_stack([e[i] for e in elements]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack([e[k] for e in elements]) for k in first}
    return np.stack(elements)


class Dataset:
    """A sequence of elements; see the module docstring."""

    def __init__(self, make_iter, length=None, source=None):
        self._make_iter = make_iter
        self._length = length  # elements per pass, when known
        # (x, y) arrays and the transformations fit() can run in C++ instead (see keras)
        self._source = source

    # ---- sources ----
    @staticmethod
    def from_tensor_slices(tensors):
        """Elements are the slices along the first axis of an array, or of each in a tuple/dict."""
        arrays = _structure_map(np.asarray, tensors)
        lengths = set()
        _structure_map(lambda a: lengths.add(a.shape[0] if a.ndim else -1), arrays)
        if -1 in lengths:
            raise ValueError("from_tensor_slices: every tensor needs a first axis to slice")
        if len(lengths) != 1:
            raise ValueError(f"from_tensor_slices: the tensors' first axes differ: {sorted(lengths)}")
        n = lengths.pop()

        return Dataset._indexed(arrays, lambda _pass: np.arange(n), n)

    @staticmethod
    def _indexed(arrays, order, n):
        """Elements arrays[order(pass)[i]]: slices of arrays in an order known per pass, which
        shuffle() and batch() keep as index arithmetic (no per-element Python)."""
        passes = itertools.count()

        def gen():
            idx = order(next(passes))
            for i in idx:
                yield _structure_map(lambda a: a[i], arrays)
        ds = Dataset(gen, n)
        ds._index_source = (arrays, order)
        return ds

    @staticmethod
    def from_tensors(tensors):
        element = _structure_map(np.asarray, tensors)
        return Dataset(lambda: iter([element]), 1)

    @staticmethod
    def range(*args):
        r = range(*args)
        return Dataset(lambda: (np.int64(i) for i in r), len(r))

    @staticmethod
    def from_generator(generator, output_signature=None, output_types=None, output_shapes=None):
        del output_signature, output_types, output_shapes
        return Dataset(lambda: iter(generator()), None)

    # ---- transformations ----
    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """tf.data's buffered shuffle: a buffer of `buffer_size` elements, each output drawn
        uniformly from it and replaced by the next input. buffer_size >= the dataset's length is
        a uniform permutation. Each pass (epoch) reshuffles unless told not to."""
        if buffer_size < 1:
            raise ValueError(f"shuffle: buffer_size {buffer_size} must be at least 1")
        seed = 0 if seed is None else int(seed)
        src = getattr(self, "_index_source", None)
        if src is not None:  # the C++ pipeline's shuffle of the ids: `tessera train`'s order
            arrays, order = src
            n = self._length

            def shuffled(p):
                e = p if reshuffle_each_iteration else 0
                return order(p)[core.shuffle_order(n, min(buffer_size, max(n, 1)), seed, e)]
            return Dataset._indexed(arrays, shuffled, n)
        parent = self
        epoch = itertools.count()

        def gen():
            e = next(epoch) if reshuffle_each_iteration else 0
            rng = np.random.default_rng([seed, e])
            buf = []
            for x in parent._make_iter():
                if len(buf) < buffer_size:
                    buf.append(x)
                    continue
                i = int(rng.integers(len(buf)))
                yield buf[i]
                buf[i] = x
            while buf:
                i = int(rng.integers(len(buf)))
                buf[i], buf[-1] = buf[-1], buf[i]
                yield buf.pop()
        return Dataset(gen, self._length)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None):
        del num_parallel_calls, deterministic
        if batch_size < 1:
            raise ValueError(f"batch: batch_size {batch_size} must be at least 1")
        parent = self
        src = getattr(self, "_index_source", None)
        passes = itertools.count()

        def gen():
            if src is not None:  # straight off the arrays: a batch is one gather of each
                arrays, order = src
                idx = order(next(passes))
                end = len(idx) - len(idx) % batch_size if drop_remainder else len(idx)
                for i in range(0, end, batch_size):
                    rows = idx[i:i + batch_size]
                    yield _structure_map(lambda a: a[rows], arrays)
                return
            buf = []
            for x in parent._make_iter():
                buf.append(x)
                if len(buf) == batch_size:
                    yield _stack(buf)
                    buf = []
            if buf and not drop_remainder:
                yield _stack(buf)
        n = None
        if self._length is not None:
            n = self._length // batch_size if drop_remainder else -(-self._length // batch_size)
        return Dataset(gen, n)

    def unbatch(self):
        parent = self

        def gen():
            for b in parent._make_iter():
                first = b[0] if isinstance(b, tuple) else b
                for i in range(len(first)):
                    yield _structure_map(lambda a: a[i], b)
        return Dataset(gen, None)

    def map(self, map_func, num_parallel_calls=None, deterministic=None):
        """Calls the Python function on each element (a tuple element is passed as arguments,
        as tf.data does). It runs in Python: its cost is the function's, per element — map after
        batch() to pay it once a batch."""
        del num_parallel_calls, deterministic
        parent = self

        def gen():
            for x in parent._make_iter():
                yield map_func(*x) if isinstance(x, tuple) else map_func(x)
        return Dataset(gen, self._length)

    def filter(self, predicate):
        parent = self

        def gen():
            for x in parent._make_iter():
                if bool(predicate(*x) if isinstance(x, tuple) else predicate(x)):
                    yield x
        return Dataset(gen, None)

    def cache(self, filename=""):
        """Keeps the elements of the first full pass in memory; later passes replay them."""
        if filename:
            raise ValueError("cache: only the in-memory cache (filename='') is supported")
        parent = self
        store = {}

        def gen():
            if "done" in store:
                yield from store["done"]
                return
            items = []
            for x in parent._make_iter():
                items.append(x)
                yield x
            store["done"] = items
        return Dataset(gen, self._length)

    def repeat(self, count=None):
        parent = self

        def gen():
            for _ in (itertools.count() if count is None or count < 0 else range(count)):
                yield from parent._make_iter()
        n = None
        if count is not None and count >= 0 and self._length is not None:
            n = self._length * count
        ds = Dataset(gen, n)
        ds._infinite = count is None or count < 0
        return ds

    def take(self, count):
        parent = self
        return Dataset(lambda: itertools.islice(parent._make_iter(), count),
                       None if self._length is None else min(self._length, count)
                       if count >= 0 else self._length)

    def skip(self, count):
        parent = self
        return Dataset(lambda: itertools.islice(parent._make_iter(), count, None),
                       None if self._length is None else max(0, self._length - count))

    def shard(self, num_shards, index):
        """Every num_shards-th element from `index` (tf.data's shard: one worker's share)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard: index {index} is not in [0, {num_shards})")
        parent = self
        n = None if self._length is None else len(range(index, self._length, num_shards))
        return Dataset(lambda: itertools.islice(parent._make_iter(), index, None, num_shards), n)

    def prefetch(self, buffer_size):
        """Runs the chain ahead on a thread, up to buffer_size elements (AUTOTUNE: 2)."""
        depth = 2 if buffer_size in (None, AUTOTUNE) or buffer_size < 1 else int(buffer_size)
        parent = self

        def gen():
            q = queue.Queue(maxsize=depth)
            stop = threading.Event()
            done = object()

            def producer():
                try:
                    for x in parent._make_iter():
                        while not stop.is_set():
                            try:
                                q.put(("item", x), timeout=0.1)
                                break
                            except queue.Full:
                                continue
                        if stop.is_set():
                            return
                    q.put(("end", done))
                except BaseException as e:  # handed to the consumer, raised there
                    q.put(("error", e))
            t = threading.Thread(target=producer, daemon=True, name="tessera.data.prefetch")
            t.start()
            try:
                while True:
                    kind, x = q.get()
                    if kind == "end":
                        return
                    if kind == "error":
                        raise x
                    yield x
            finally:
                stop.set()
        return Dataset(gen, self._length)

    def with_options(self, options):
        return self

    def apply(self, transformation_func):
        return transformation_func(self)

    # ---- use ----
    def __iter__(self):
        return iter(self._make_iter())

    def as_numpy_iterator(self):
        return iter(self)

    def cardinality(self):
        if getattr(self, "_infinite", False):
            return INFINITE_CARDINALITY
        return UNKNOWN_CARDINALITY if self._length is None else self._length

    def __len__(self):
        if self._length is None or getattr(self, "_infinite", False):
            raise TypeError("The dataset length is unknown or infinite.")
        return self._length


INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
