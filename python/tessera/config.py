"""tf.config's cluster connection: the simulated chips need no connection; the calls check the
resolver and keep the program's shape."""
from tessera.distribute.cluster_resolver import TPUClusterResolver


class experimental:  # noqa: N801  (tf.config.experimental)
    @staticmethod
    def experimental_connect_to_cluster(resolver):
        return experimental_connect_to_cluster(resolver)


def experimental_connect_to_cluster(cluster_spec_or_resolver, *args, **kwargs):
    if not isinstance(cluster_spec_or_resolver, TPUClusterResolver):
        raise TypeError("experimental_connect_to_cluster: a "
                        "tessera.distribute.cluster_resolver.TPUClusterResolver")
    return cluster_spec_or_resolver


def list_logical_devices(device_type=None):
    return []
