"""tf.keras.optimizers the chip's update step implements (docs/compiler.md, "Optimizers"), and
the learning-rate schedules it evaluates per step."""
from tessera._core import core


class schedules:  # noqa: N801  (keras.optimizers.schedules)
    class CosineDecay:
        def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, **kwargs):
            if alpha != 0.0 or kwargs:
                raise ValueError("CosineDecay: only alpha=0 (to zero over decay_steps)")
            self.initial_learning_rate, self.decay_steps = float(initial_learning_rate), int(decay_steps)
            self.name = "cosine"

    class PolynomialDecay:
        def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle=False, **kwargs):
            if power != 1.0 or cycle or end_learning_rate != 0.0 or kwargs:
                raise ValueError("PolynomialDecay: only power=1, end_learning_rate=0, "
                                 "cycle=False (linear to zero over decay_steps)")
            self.initial_learning_rate, self.decay_steps = float(initial_learning_rate), int(decay_steps)
            self.name = "linear"


def _rate(lr, spec):
    if isinstance(lr, (schedules.CosineDecay, schedules.PolynomialDecay)):
        spec.learning_rate = lr.initial_learning_rate
        spec.schedule = lr.name
        spec.decay_steps = lr.decay_steps
    else:
        spec.learning_rate = float(lr)


class Optimizer:
    def _check(self, kwargs):
        for key, default in (("clipnorm", None), ("clipvalue", None), ("global_clipnorm", None),
                             ("weight_decay", None), ("use_ema", False), ("amsgrad", False),
                             ("nesterov", False)):
            if key in kwargs and kwargs.pop(key) != default:
                raise ValueError(f"{type(self).__name__}: {key} is not supported on the chip")
        kwargs.pop("name", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")


class Adam(Optimizer):
    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07, **kwargs):
        self._check(kwargs)
        self.learning_rate, self.beta_1, self.beta_2, self.epsilon = (learning_rate, beta_1,
                                                                      beta_2, epsilon)

    def _spec(self):
        s = core.OptimizerSpec()
        s.kind = "adam"
        _rate(self.learning_rate, s)
        s.beta_1, s.beta_2, s.epsilon = self.beta_1, self.beta_2, self.epsilon
        return s


class SGD(Optimizer):
    def __init__(self, learning_rate=0.01, momentum=0.0, **kwargs):
        self._check(kwargs)
        self.learning_rate, self.momentum = learning_rate, momentum

    def _spec(self):
        s = core.OptimizerSpec()
        s.kind = "sgd"
        _rate(self.learning_rate, s)
        s.momentum = self.momentum
        return s


def get(identifier):
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        name = identifier.lower()
        if name == "adam":
            return Adam()
        if name == "sgd":
            return SGD()
        raise ValueError(f"optimizer '{identifier}': the chip's update step implements 'adam' "
                         "and 'sgd'")
    raise ValueError(f"optimizer {identifier!r}: 'adam', 'sgd' or an Adam/SGD instance")


__all__ = ["Adam", "SGD", "Optimizer", "get", "schedules"]
