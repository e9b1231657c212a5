"""tf.keras for Tessera: Sequential, layers, optimizers, losses, callbacks, datasets, utils."""
from tessera.keras import callbacks, datasets, layers, losses, optimizers, utils
from tessera.keras.layers import Input
from tessera.keras.models import Model, Sequential


class models:  # noqa: N801  (keras.models.Sequential)
    Sequential = Sequential


class mixed_precision:  # noqa: N801
    """The chip's precision is fixed: bf16 operands, fp32 accumulation and master weights —
    Keras's 'mixed_bfloat16' policy. Setting that policy is accepted; any other is refused."""

    @staticmethod
    def set_global_policy(policy):
        name = getattr(policy, "name", policy)
        if name != "mixed_bfloat16":
            raise ValueError(f"mixed_precision policy {name!r}: the chip computes "
                             "'mixed_bfloat16' (bf16 operands, fp32 sums and weights)")

    @staticmethod
    def global_policy():
        return "mixed_bfloat16"


__all__ = ["Sequential", "Model", "Input", "layers", "optimizers", "losses", "callbacks",
           "datasets", "utils", "models", "mixed_precision"]
