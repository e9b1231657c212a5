"""tf.keras.Sequential on the simulated chip (docs/python.md).

The model is the C++ keras::Sequential (sw/keras/): compile() here records Keras's arguments and
checks them; the chip program is compiled when the first batch fixes the input shape and the
global batch (Keras builds lazily too), by the one compiler `tessera train` uses. fit() runs the
loop in Python — data, callbacks, progress bar, Ctrl-C — and each step in C++ with the GIL
released.
"""
import math
import signal
import sys
import threading

import numpy as np

from tessera import distribute
from tessera._core import core
from tessera.data.dataset import Dataset
from tessera.keras import callbacks as callbacks_module
from tessera.keras import layers as layers_module
from tessera.keras import losses, optimizers, utils

_METRICS = ("accuracy", "acc", "sparse_categorical_accuracy")


def _labels(y, what="y"):
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{what}: shape {y.shape}: sparse labels, one class index per sample "
                         "(sparse_categorical_crossentropy)")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError(f"{what}: float labels must be whole class indices")
    elif y.dtype.kind not in "iu":
        raise ValueError(f"{what}: dtype {y.dtype}: class indices (integers)")
    return y.astype(np.int64, copy=False)


def _images(x, what="x"):
    x = np.asarray(x)
    if x.dtype.kind not in "uif" or x.ndim < 2:
        raise ValueError(f"{what}: dtype {x.dtype}, shape {x.shape}: images (n, H, W[, C]) or "
                         "inputs (n, values) as numbers")
    if x.dtype != np.uint8 and x.dtype != np.float32:
        x = x.astype(np.float32)  # (uint8 are pixels, staged as p / 255; other dtypes values)
    return np.ascontiguousarray(x)


def _split(element):
    """(x, y) of a dataset element."""
    if isinstance(element, tuple):
        if len(element) == 2:
            return element
        if len(element) == 3:
            raise ValueError("sample weights (a third element) are not supported on the chip")
    raise ValueError("a dataset for fit/evaluate yields (images, labels) pairs")


class _Interrupt:
    """Ctrl-C during fit(): the step running finishes, its callbacks run, then fit stops."""

    def __init__(self):
        self.hit = False
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.hit:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.hit = True

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


class Sequential:
    def __init__(self, layers=None, name=None, trainable=True):
        del trainable
        self.name = name or "sequential"
        self.layers = []
        self._input_shape = None
        # The strategy whose scope the model is built in: its chips (TF's rule, too).
        self._strategy = distribute.get_strategy()
        self._cpp = None
        self._shadow = None  # the sampled backend's rtl chip
        self._compiled = False
        self.history = None
        self.stop_training = False
        self.step_cycles = []  # cycles of each training step on the rtl chip (0: functional)
        self._seed = utils.get_random_seed()
        self._built_keep_gradients = False
        for layer in layers or []:
            self.add(layer)

    # ---- building ----
    def add(self, layer):
        if not isinstance(layer, layers_module.Layer):
            raise TypeError(f"Sequential.add: {layer!r} is not a tessera.keras.layers layer")
        if self._cpp is not None:
            raise ValueError("Sequential.add: the model is built (its chip program compiled)")
        if isinstance(layer, layers_module.InputLayer):
            if self.layers:
                raise ValueError("Sequential: an Input must come first")
            self._input_shape = layer.input_shape
            return
        if layer.input_shape is not None:
            if self.layers:
                raise ValueError(f"{layer.name}: input_shape only on the first layer")
            self._input_shape = layer.input_shape
        self.layers.append(layer)

    def pop(self):
        if self._cpp is not None:
            raise ValueError("Sequential.pop: the model is built")
        return self.layers.pop()

    def _cpp_layers(self, input_shape):
        out = []
        py_layers = list(self.layers)
        body = [l for l in py_layers if not isinstance(l, layers_module.Normalization)]
        if body and isinstance(body[0], layers_module.Dense) and \
                not any(isinstance(l, layers_module.Flatten) for l in py_layers):
            # Dense on (values,) inputs: the compiler's Flatten of a (1, values, 1) map
            at = py_layers.index(body[0])
            py_layers.insert(at, layers_module.Flatten(name="flatten_inputs"))
        dropouts = 0
        for layer in py_layers:
            if isinstance(layer, layers_module.Dropout):
                out.append(layer._cpp(default_seed=self._seed * 1000 + dropouts))
                dropouts += 1
            else:
                out.append(layer._cpp())
        if not out:
            raise ValueError("Sequential: the model has no layers")
        out[0].input_shape = list(input_shape)
        core.check_layers(out)
        return out

    def build(self, input_shape=None):
        """Fixes the input shape ((None, H, W, C), (None, H, W) or (None, values)); the chip
        program is compiled with the first batch."""
        if input_shape is not None:
            shape = tuple(input_shape)[1:]
            self._input_shape = layers_module._input_shape({"input_shape": shape}, "build")
        if self._input_shape is not None:
            self._cpp_layers(self._input_shape)

    @property
    def built(self):
        return self._cpp is not None

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=False, steps_per_execution=1,
                jit_compile=None, **kwargs):
        """Keras's compile: 'adam' / 'sgd' or an Adam/SGD instance, the sparse categorical
        cross-entropy, metrics ['accuracy']. run_eagerly, steps_per_execution and jit_compile
        are accepted and change nothing (every step is one compiled chip program)."""
        del run_eagerly, steps_per_execution, jit_compile
        kwargs.pop("auto_scale_loss", None)
        if kwargs:
            raise TypeError(f"compile: unexpected keyword argument '{next(iter(kwargs))}'")
        if loss is None:
            raise ValueError("compile: loss is required ('sparse_categorical_crossentropy')")
        if loss_weights is not None or weighted_metrics is not None:
            raise ValueError("compile: loss_weights / weighted_metrics are not supported")
        opt = optimizers.get(optimizer)
        loss_obj = losses.get(loss)
        metrics = list(metrics or [])
        for m in metrics:
            if m not in _METRICS:
                raise ValueError(f"compile: metric {m!r}: the chip reports 'accuracy'")
        spec = opt._spec()
        spec.label_smoothing = loss_obj.label_smoothing
        self.optimizer = opt
        self.loss = loss_obj
        self.metrics_names = ["loss"] + (["accuracy"] if metrics else [])
        self._metric_name = metrics[0] if metrics else None
        self._opt_spec = spec
        if self._cpp is not None:  # recompiling: a new chip program, the weights kept
            weights = self.get_weights()
            self._cpp = None
            self._pending_weights = weights
        self._compiled = True
        if self._input_shape is not None:
            self._cpp_layers(self._input_shape)  # refuse a bad stack now, not at fit()

    def _device_options(self, backend=None):
        o = self._strategy.cluster_resolver.options
        d = core.DeviceOptions()
        d.backend = backend or ("functional" if o["backend"] == "sampled" else o["backend"])
        d.array = o["array"]
        d.channels = o["channels"]
        d.arith = o["arith"]
        d.keep_gradients = getattr(self, "_keep_gradients", False)
        return d

    def _ensure_built(self, x_shape, batch):
        """Compiles the chip program for this input shape and global batch (once; a new batch
        size recompiles it, carrying the weights and optimizer state)."""
        if not self._compiled:
            raise RuntimeError("You must call compile() before fit/evaluate/predict")
        shape = layers_module._input_shape({"input_shape": tuple(x_shape)}, "input")
        if self._input_shape is None:
            self._input_shape = shape
        elif tuple(self._input_shape) != tuple(shape):  # (an NCHW array is not NHWC)
            raise ValueError(f"the data's images are {tuple(x_shape)}, the model takes "
                             f"{self._input_shape}")
        keep = getattr(self, "_keep_gradients", False)
        if self._cpp is not None and self._cpp.batch_size == batch and \
                (self._built_keep_gradients or not keep):
            return
        replicas = self._strategy.num_replicas_in_sync
        if batch % replicas:
            raise ValueError(f"the global batch {batch} is not a multiple of the "
                             f"{replicas} replicas (TPUStrategy.num_replicas_in_sync)")
        state = self._cpp.get_state() if self._cpp is not None else None
        step = self._cpp.step if self._cpp is not None else 0
        layers = self._cpp_layers(self._input_shape)
        o = self._strategy.cluster_resolver.options
        model = core.Sequential(layers, replicas, o["threads"])
        model.compile(self._opt_spec, self._device_options(), batch, self._seed)
        if state is not None:
            model.set_state(state)
            model.step = step
        if getattr(self, "_pending_weights", None) is not None:
            model.set_weights(self._pending_weights)
            self._pending_weights = None
        self._cpp = model
        self._built_keep_gradients = keep
        if o["backend"] == "sampled":
            self._shadow = core.Sequential(layers, replicas, o["threads"])
            self._shadow.compile(self._opt_spec, self._device_options("rtl"), batch, self._seed)

    # ---- steps ----
    def _train_step(self, xb, yb, epoch, index):
        m = self._cpp
        o = self._strategy.cluster_resolver.options
        check = self._shadow is not None and m.step % o["sample_every"] == 0
        if check:
            self._shadow.set_state(m.get_state())
            self._shadow.step = m.step
        logs = m.train_on_batch(xb.reshape(len(yb), -1), yb, epoch, index)
        if check:
            rtl = self._shadow.train_on_batch(xb.reshape(len(yb), -1), yb, epoch, index)
            a, b = m.get_state(), self._shadow.get_state()
            same = (rtl["loss"] == logs["loss"] and rtl["accuracy"] == logs["accuracy"] and
                    all(np.array_equal(p.view(np.uint32), q.view(np.uint32))
                        for k in ("weights", "m", "v") for p, q in zip(a[k], b[k])))
            if not same:
                raise RuntimeError(f"sampled backend: step {logs['step']}: the rtl chip's "
                                   "results differ from the functional model's")
            logs.update({k: rtl[k] for k in ("cycles", "macs", "dma_busy", "mxu_busy",
                                             "vpu_busy", "hbm_read_bytes", "hbm_write_bytes")})
        n = m.array
        logs["mxu_utilization"] = logs["macs"] / (n * n * logs["cycles"]) if logs["cycles"] else 0.0
        return logs

    def _batches_from_arrays(self, x, y, batch, shuffle, epoch):
        n = len(y)
        order = core.shuffle_order(n, n if shuffle else 1, self._seed, epoch)
        for i in range(n // batch):  # the last partial batch is dropped (docs/python.md)
            rows = order[i * batch:(i + 1) * batch]
            yield x[rows], y[rows]

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1, **kwargs):
        for key in ("max_queue_size", "workers", "use_multiprocessing"):
            kwargs.pop(key, None)
        if kwargs:
            raise TypeError(f"fit: unexpected keyword argument '{next(iter(kwargs))}'")
        if class_weight is not None or sample_weight is not None:
            raise ValueError("fit: class_weight / sample_weight are not supported on the chip")
        if not self._compiled:
            raise RuntimeError("You must call compile() before fit()")
        if validation_split:
            if isinstance(x, Dataset):
                raise ValueError("fit: validation_split needs arrays, not a Dataset")
            cut = int(len(x) * (1 - validation_split))
            validation_data = (x[cut:], y[cut:])
            x, y = x[:cut], y[:cut]
        # ---- the data: (x, y) arrays or a Dataset of (x, y) batches ----
        if isinstance(x, Dataset):
            if y is not None:
                raise ValueError("fit: a Dataset carries its labels; y must be None")
            if batch_size is not None:
                raise ValueError("fit: batch_size with a Dataset: the Dataset's batch() sets it")
            dataset = x
            steps = steps_per_epoch
            if steps is None:
                steps = dataset.cardinality() if dataset.cardinality() >= 0 else None
            iterator = [None]

            def epoch_batches(epoch):
                taken = 0
                while steps is None or taken < steps:
                    if iterator[0] is None:
                        iterator[0] = iter(dataset)
                    try:
                        element = next(iterator[0])
                    except StopIteration:
                        iterator[0] = None
                        if steps is None or taken == 0:
                            return
                        continue  # steps_per_epoch past the data: start the next pass
                    taken += 1
                    xb, yb = _split(element)
                    yield _images(xb), _labels(yb)
                if steps_per_epoch is None:
                    iterator[0] = None
        else:
            if x is None or y is None:
                raise ValueError("fit: x and y (arrays), or x a tessera.data.Dataset")
            x, y = _images(x), _labels(y)
            if len(x) != len(y):
                raise ValueError(f"fit: {len(x)} images and {len(y)} labels")
            batch = batch_size or 32
            per_epoch = len(y) // batch
            if per_epoch == 0:
                raise ValueError(f"fit: {len(y)} samples make no batch of {batch}")
            steps = min(steps_per_epoch, per_epoch) if steps_per_epoch else per_epoch

            def epoch_batches(epoch):
                for i, b in enumerate(self._batches_from_arrays(x, y, batch, shuffle, epoch)):
                    if i == steps:
                        return
                    yield b

        verbose = (1 if sys.stdout.isatty() else 2) if verbose == "auto" else verbose
        if core.mpi_rank() != 0:
            verbose = 0
        history = callbacks_module.History()
        cbs = callbacks_module.CallbackList(
            list(callbacks or []) + ([callbacks_module.ProgbarLogger()] if verbose else []) +
            [history], model=self,
            params={"epochs": epochs, "steps": steps, "verbose": verbose})
        self._keep_gradients = any(getattr(c, "needs_gradients", False) for c in cbs.callbacks)
        self.stop_training = False
        warned = [False]
        with _Interrupt() as interrupt:
            started = False
            for epoch in range(initial_epoch, epochs):
                losses_, accs = [], []
                batch_logs = {}
                epoch_started = False
                for index, (xb, yb) in enumerate(epoch_batches(epoch)):
                    if not started:
                        self._ensure_built(xb.shape[1:], len(yb))
                    if len(yb) != self._cpp.batch_size:
                        if len(yb) < self._cpp.batch_size:  # a dataset's last partial batch
                            if not warned[0] and verbose:
                                print(f"tessera: a batch of {len(yb)} is smaller than the "
                                      f"compiled batch {self._cpp.batch_size}: not trained on "
                                      "(batch(..., drop_remainder=True) drops it)",
                                      file=sys.stderr)
                            warned[0] = True
                            continue
                        raise ValueError(f"fit: a batch of {len(yb)}, larger than the first "
                                         f"batch {self._cpp.batch_size}")
                    if not started:
                        # the data's labels against the model's classes before any file is
                        # written (later batches of a dataset: the C++ step refuses them)
                        self._check_labels(yb if isinstance(x, Dataset) else y)
                        cbs.on_train_begin()
                        started = True
                    if not epoch_started:
                        cbs.on_epoch_begin(epoch)
                        epoch_started = True
                    cbs.on_train_batch_begin(index)
                    step_logs = self._train_step(xb, yb, epoch, index)
                    self.step_cycles.append(step_logs["cycles"])
                    losses_.append(step_logs["loss"])
                    accs.append(step_logs["accuracy"])
                    batch_logs = {"loss": float(np.mean(losses_))}
                    if self._metric_name:
                        batch_logs["accuracy"] = float(np.mean(accs))
                    self._last_step_logs = step_logs
                    cbs.on_train_batch_end(index, batch_logs)
                    if interrupt.hit or self.stop_training:
                        break
                if not started:
                    raise ValueError("fit: the data yielded no batch")
                if interrupt.hit:  # the epoch did not finish: no epoch logs
                    break
                epoch_logs = dict(batch_logs)
                if validation_data is not None and not interrupt.hit and \
                        (epoch + 1) % validation_freq == 0:
                    val = self._evaluate_source(validation_data, validation_batch_size,
                                                validation_steps)
                    epoch_logs["val_loss"] = val[0]
                    if self._metric_name:
                        epoch_logs["val_accuracy"] = val[1]
                cbs.on_epoch_end(epoch, epoch_logs)
                if self.stop_training:
                    break
            cbs.on_train_end()
            if interrupt.hit:
                print(f"\ntessera: interrupted after step {self._cpp.step} (every callback's "
                      "files written)", file=sys.stderr)
                raise KeyboardInterrupt
        self.history = history
        return history

    def _check_labels(self, y):
        if len(y) and int(y.max()) >= self._cpp.classes:
            raise ValueError(f"labels: {int(y.max())} is not below the model's "
                             f"{self._cpp.classes} classes")
        if len(y) and int(y.min()) < 0:
            raise ValueError(f"labels: {int(y.min())} is not a class index")

    # ---- evaluation ----
    def _evaluate_source(self, data, batch_size, steps):
        if isinstance(data, Dataset):
            batches = (_split(e) for e in data)
        else:
            if not isinstance(data, (tuple, list)) or len(data) != 2:
                raise ValueError("validation_data: (x, y) or a Dataset")
            x, y = _images(data[0]), _labels(data[1])
            if len(x) != len(y):
                raise ValueError(f"evaluate: {len(x)} images and {len(y)} labels")
            b = batch_size or 32
            batches = ((x[i:i + b], y[i:i + b]) for i in range(0, len(y), b))
        loss_sum = acc_sum = 0.0
        count = 0
        for i, (xb, yb) in enumerate(batches):
            if steps is not None and i == steps:
                break
            xb, yb = _images(xb), _labels(yb)
            self._ensure_evaluable(xb, yb)
            loss, acc = self._cpp.evaluate_batch(xb.reshape(len(yb), -1), yb)
            loss_sum += loss * len(yb)
            acc_sum += acc * len(yb)
            count += len(yb)
        if count == 0:
            raise ValueError("evaluate: the data yielded no batch")
        return loss_sum / count, acc_sum / count

    def _ensure_evaluable(self, xb, yb):
        if self._cpp is None:  # evaluate before fit: the smallest training step (evaluation
            # programs are compiled per batch size; fit recompiles the step for its batch)
            self._ensure_built(xb.shape[1:], self._strategy.num_replicas_in_sync)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False, **kwargs):
        if kwargs:
            raise TypeError(f"evaluate: unexpected keyword argument '{next(iter(kwargs))}'")
        if sample_weight is not None:
            raise ValueError("evaluate: sample_weight is not supported on the chip")
        data = x if isinstance(x, Dataset) else (x, y)
        loss, acc = self._evaluate_source(data, batch_size, steps)
        result = {"loss": loss}
        if self._metric_name:
            result["accuracy"] = acc
        if verbose not in (0, "auto") or (verbose == "auto" and sys.stdout.isatty()):
            print(" - ".join(f"{k}: {v:.4f}" for k, v in result.items()))
        if return_dict:
            return result
        return loss if len(result) == 1 else [loss, acc]

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        if kwargs:
            raise TypeError(f"predict: unexpected keyword argument '{next(iter(kwargs))}'")
        if isinstance(x, Dataset):
            parts = [e[0] if isinstance(e, tuple) else e for e in x]
        else:
            x = _images(x)
            b = batch_size or 32
            parts = [x[i:i + b] for i in range(0, len(x), b)]
        out = []
        for i, xb in enumerate(parts):
            if steps is not None and i == steps:
                break
            xb = _images(xb)
            if self._cpp is None:
                self._ensure_evaluable(xb, np.zeros(len(xb), np.int64))
            out.append(self._cpp.predict_batch(xb.reshape(len(xb), -1), len(xb)))
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def train_on_batch(self, x, y, sample_weight=None, class_weight=None, return_dict=False):
        if sample_weight is not None or class_weight is not None:
            raise ValueError("train_on_batch: sample/class weights are not supported on the chip")
        x, y = _images(x), _labels(y)
        self._ensure_built(x.shape[1:], len(y))
        logs = self._train_step(x, y, 0, 0)
        result = {"loss": logs["loss"]}
        if self._metric_name:
            result["accuracy"] = logs["accuracy"]
        return result if return_dict else (result["loss"] if len(result) == 1
                                           else [result["loss"], result["accuracy"]])

    def test_on_batch(self, x, y, return_dict=False):
        x, y = _images(x), _labels(y)
        self._ensure_evaluable(x, y)
        loss, acc = self._cpp.evaluate_batch(x.reshape(len(y), -1), y)
        result = {"loss": loss, "accuracy": acc} if self._metric_name else {"loss": loss}
        return result if return_dict else (loss if len(result) == 1 else [loss, acc])

    def predict_on_batch(self, x):
        return self.predict(x, batch_size=len(x), verbose=0)

    def __call__(self, x):
        return self.predict(x, verbose=0)

    # ---- weights ----
    def _require_built(self, what):
        if self._cpp is None:
            if self._input_shape is None or not self._compiled:
                raise ValueError(f"{what}: the model is not built (compile it and give it an "
                                 "input_shape, or fit it)")
            self._ensure_built((self._input_shape[0], self._input_shape[1],
                                self._input_shape[2]), self._strategy.num_replicas_in_sync)

    def get_weights(self):
        """[kernel0, bias0, ...] as numpy float32 in Keras's shapes (Conv2D (kh, kw, in, out),
        Dense (in, out))."""
        self._require_built("get_weights")
        return list(self._cpp.get_weights())

    def set_weights(self, weights):
        self._require_built("set_weights")
        self._cpp.set_weights([np.asarray(w, dtype=np.float32) for w in weights])

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None):
        import os
        self._require_built("save_weights")
        if not overwrite and os.path.exists(filepath):
            raise FileExistsError(filepath)
        self._cpp.save_weights(str(filepath))

    def load_weights(self, filepath, skip_mismatch=False, by_name=False, options=None):
        if skip_mismatch or by_name:
            raise ValueError("load_weights: skip_mismatch / by_name are not supported")
        self._require_built("load_weights")
        self._cpp.load_weights(str(filepath))

    def count_params(self):
        return sum(int(np.prod(w.shape)) for w in self.get_weights())

    def summary(self, line_length=None, positions=None, print_fn=None, **kwargs):
        """Keras's layer table (the C++ one), with the chip and the compiled step."""
        if self._cpp is None and self._input_shape is not None and self._compiled:
            self._require_built("summary")
        if self._cpp is None:
            text = (f'Model: "{self.name}" (not built: the input shape is known at the first '
                    "batch)\n" + "\n".join(f"{l.name} ({type(l).__name__})" for l in self.layers))
        else:
            st = self._cpp.program_stats()
            o = self._strategy.cluster_resolver.options
            text = (f'Model: "{self.name}"\n{self._cpp.summary()}'
                    f"Chip: {self._strategy.num_replicas_in_sync} x {o['backend']} "
                    f"{o['array']}x{o['array']} MXU; step program {st['instructions']} "
                    f"instructions for a global batch of {self._cpp.batch_size}\n")
        (print_fn or print)(text.rstrip("\n"))

    # ---- the chip's view ----
    def step_report(self):
        """The compiled step's statistics and bounds, and the last step's counters."""
        self._require_built("step_report")
        r = dict(self._cpp.program_stats())
        r["last_step"] = dict(getattr(self, "_last_step_logs", {}))
        return r


def Model(*args, **kwargs):  # noqa: N802  (keras.Model)
    """Functional models (keras.Model(inputs, outputs)) are not compiled for the chip: a
    Sequential stack is (docs/python.md, "What differs from tf.keras")."""
    raise ValueError("keras.Model: functional models are not supported on the chip; build a "
                     "tessera.keras.Sequential")
