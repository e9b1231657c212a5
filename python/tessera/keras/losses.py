"""The loss the chip's step computes: the softmax's sparse categorical cross-entropy, optionally
label-smoothed (Keras's CategoricalCrossentropy(label_smoothing) on one-hot targets)."""


class SparseCategoricalCrossentropy:
    def __init__(self, from_logits=False, ignore_class=None, label_smoothing=0.0, **kwargs):
        if from_logits:
            raise ValueError("SparseCategoricalCrossentropy: from_logits=True: the chip's last "
                             "layer is Dense(softmax) and the loss takes its probabilities")
        if ignore_class is not None:
            raise ValueError("SparseCategoricalCrossentropy: ignore_class is not supported")
        kwargs.pop("name", None)
        kwargs.pop("reduction", None)
        if kwargs:
            raise TypeError("SparseCategoricalCrossentropy: unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        self.label_smoothing = float(label_smoothing)


def get(identifier):
    if isinstance(identifier, SparseCategoricalCrossentropy):
        return identifier
    if identifier in ("sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"):
        return SparseCategoricalCrossentropy()
    raise ValueError(f"loss {identifier!r}: the chip computes 'sparse_categorical_crossentropy'")
