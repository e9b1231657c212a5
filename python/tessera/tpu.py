"""tf.tpu.experimental.initialize_tpu_system: marks the resolver's system initialized (the
chips are opened when a model is compiled) and returns its topology."""
from tessera.distribute.cluster_resolver import TPUClusterResolver


class Topology:
    def __init__(self, resolver):
        self.num_tasks = 1
        self.num_tpus_per_task = resolver.num_chips
        self.mesh_shape = [resolver.num_chips]
        self.resolver = resolver

    def __repr__(self):
        return f"Topology(ring of {self.num_tpus_per_task} chips: {self.resolver.master()})"


class experimental:  # noqa: N801  (tf.tpu.experimental)
    @staticmethod
    def initialize_tpu_system(cluster_resolver=None):
        resolver = cluster_resolver or TPUClusterResolver()
        if not isinstance(resolver, TPUClusterResolver):
            raise TypeError("initialize_tpu_system: a TPUClusterResolver")
        resolver.initialized = True
        return Topology(resolver)

    @staticmethod
    def shutdown_tpu_system(cluster_resolver=None):
        if cluster_resolver is not None:
            cluster_resolver.initialized = False
