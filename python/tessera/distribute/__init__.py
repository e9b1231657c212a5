"""tf.distribute's TPU data parallelism over a ring of simulated chips (docs/multichip.md).

A model built inside `strategy.scope()` is replicated on `num_replicas_in_sync` chips: each step
every chip trains on its share of the global batch, the gradients are summed over the chips'
ICI links by the step program's ring all-reduce, and every chip applies the same update.
"""
import contextlib
import threading

from tessera.distribute import cluster_resolver
from tessera.distribute.cluster_resolver import TPUClusterResolver

_local = threading.local()


class TPUStrategy:
    def __init__(self, tpu_cluster_resolver=None, experimental_device_assignment=None, **kwargs):
        if kwargs:
            raise TypeError("TPUStrategy: unexpected keyword argument '"
                            + next(iter(kwargs)) + "'")
        del experimental_device_assignment
        self.cluster_resolver = tpu_cluster_resolver or TPUClusterResolver()
        self.extended = self

    @property
    def num_replicas_in_sync(self):
        return self.cluster_resolver.num_chips

    @contextlib.contextmanager
    def scope(self):
        stack = _stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    def experimental_distribute_dataset(self, dataset, options=None):
        del options  # the global batch is split by fit(); the dataset is used as it is
        return dataset

    def __repr__(self):
        return f"TPUStrategy({self.num_replicas_in_sync} replicas on {self.cluster_resolver.master()})"


class _DefaultStrategy(TPUStrategy):
    """No scope entered: one functional chip, unless TESSERA_TPU names the system."""

    def __init__(self):
        import os
        spec = os.environ.get("TESSERA_TPU") or "backend=functional,chips=1"
        super().__init__(TPUClusterResolver(tpu=spec))


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def get_strategy():
    """The strategy whose scope is entered, else the default (one chip)."""
    stack = _stack()
    return stack[-1] if stack else _DefaultStrategy()


def has_strategy():
    return bool(_stack())


__all__ = ["TPUStrategy", "TPUClusterResolver", "cluster_resolver", "get_strategy", "has_strategy"]
