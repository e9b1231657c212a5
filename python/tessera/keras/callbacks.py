"""tf.keras.callbacks: History, the progress bar (with the chip's cycles and MXU utilization),
TensorBoard, ModelCheckpoint, CSVLogger, EarlyStopping, LambdaCallback (docs/python.md)."""
import csv
import os
import sys
import time

import numpy as np

from tessera._core import core


class Callback:
    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_train_batch_begin(self, batch, logs=None): pass
    def on_train_batch_end(self, batch, logs=None): pass


class CallbackList:
    def __init__(self, callbacks, model, params):
        self.callbacks = callbacks
        for c in callbacks:
            c.set_model(model)
            c.set_params(params)

    def __getattr__(self, hook):
        def call(*args, **kwargs):
            for c in self.callbacks:
                getattr(c, hook)(*args, **kwargs)
        return call


class History(Callback):
    """history: {'loss': [per epoch], 'accuracy': [...], 'val_loss': [...], ...}; epoch: the
    epochs run. Beyond Keras, step_logs: every step's own loss, accuracy, cycles, counters."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []
        self.step_logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.step_logs.append(dict(self.model._last_step_logs))

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


def _chip_fields(model):
    logs = getattr(model, "_last_step_logs", None) or {}
    if not logs.get("cycles"):
        return ""
    return f" - {logs['cycles']:,} cycles/step - MXU {100 * logs['mxu_utilization']:.1f}%"


class ProgbarLogger(Callback):
    """Keras's progress bar (verbose=1: a bar per epoch; 2: one line an epoch), with the chip's
    cycles per step and MXU utilization (MACs / N^2 / cycles) of the last step on the rtl chip."""

    def __init__(self, count_mode="steps", stateful_metrics=None, stream=None):
        super().__init__()
        self.stream = stream or sys.stdout

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.monotonic()
        if self.params.get("verbose", 1):
            print(f"Epoch {epoch + 1}/{self.params['epochs']}", file=self.stream)

    def _line(self, batch, logs, final):
        steps = self.params.get("steps")
        done = batch + 1
        elapsed = time.monotonic() - self.t0
        metrics = "".join(f" - {k}: {v:.4f}" for k, v in (logs or {}).items())
        if final:
            per = elapsed / max(done, 1)
            head = f"{done}/{done} [==============================] - {elapsed:.0f}s " \
                   f"{per * 1000:.0f}ms/step"
        else:
            total = steps or done
            width = 30
            filled = int(width * done / total) if steps else 0
            bar = "=" * max(filled - 1, 0) + (">" if filled < width else "=") + \
                  "." * (width - filled)
            eta = elapsed / done * (total - done) if steps else 0
            head = f"{done:>{len(str(total))}}/{total} [{bar}] - ETA: {eta:.0f}s"
        return head + metrics + _chip_fields(self.model)

    def on_train_batch_end(self, batch, logs=None):
        self.last = (batch, logs)
        if self.params.get("verbose") == 1:
            self.stream.write("\r" + self._line(batch, logs, False))
            self.stream.flush()

    def on_epoch_end(self, epoch, logs=None):
        batch = getattr(self, "last", (0, None))[0]
        line = self._line(batch, logs, True)
        self.stream.write(("\r" if self.params.get("verbose") == 1 else "") + line + "\n")
        self.stream.flush()


class CSVLogger(Callback):
    """A row per epoch: epoch, then the logs' keys in sorted order (as Keras writes it); the file
    is flushed every epoch, so an interrupted fit leaves whole rows."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = os.fspath(filename), separator, append
        self.file = None
        self.keys = None

    def on_train_begin(self, logs=None):
        exists = self.append and os.path.exists(self.filename) and \
            os.path.getsize(self.filename) > 0
        self.file = open(self.filename, "a" if self.append else "w", newline="")
        self.writer = None
        self.header_written = exists

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
        if self.writer is None:
            self.writer = csv.DictWriter(self.file, fieldnames=["epoch"] + self.keys,
                                         delimiter=self.sep)
            if not self.header_written:
                self.writer.writeheader()
        row = {"epoch": epoch}
        row.update({k: logs.get(k, "NA") for k in self.keys})
        self.writer.writerow(row)
        self.file.flush()
        os.fsync(self.file.fileno())

    def on_train_end(self, logs=None):
        if self.file:
            self.file.close()
            self.file = None


class ModelCheckpoint(Callback):
    """Saves the weights (tessera's checkpoint format, written atomically) every epoch or every
    `save_freq` steps; filepath may hold {epoch} and logs keys ({epoch:02d}-{val_loss:.2f}).
    save_best_only keeps the best by `monitor`. Tessera has no whole-model format: the file holds
    the weights either way (load_weights reads it)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch", initial_value_threshold=None):
        super().__init__()
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        self.save_best_only, self.save_freq = save_best_only, save_freq
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        if mode not in ("min", "max"):
            raise ValueError(f"ModelCheckpoint: mode={mode!r}: 'auto', 'min' or 'max'")
        self.better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
        self.best = initial_value_threshold
        self.steps = 0

    def _save(self, epoch, logs):
        logs = logs or {}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                print(f"ModelCheckpoint: {self.monitor} is not in the logs "
                      f"({', '.join(logs)}): saving anyway", file=sys.stderr)
            elif self.best is not None and not self.better(value, self.best):
                return
            else:
                self.best = value
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.model.save_weights(path)
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: saving the weights to {path}")

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if isinstance(self.save_freq, int) and self.steps % self.save_freq == 0:
            self._save(self._epoch, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, logs)


class EarlyStopping(Callback):
    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        self.mode = ("max" if "acc" in monitor else "min") if mode == "auto" else mode
        self.restore_best_weights = restore_best_weights
        self.best, self.wait, self.best_weights = None, 0, None
        self.stopped_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        improved = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                         else value > self.best + self.min_delta)
        if improved:
            self.best, self.wait = value, 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            return
        self.wait += 1
        if self.wait > self.patience:
            self.model.stop_training = True
            self.stopped_epoch = epoch
            if self.restore_best_weights and self.best_weights is not None:
                self.model.set_weights(self.best_weights)


class LambdaCallback(Callback):
    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None, **kw):
        super().__init__()
        for name, fn in dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                             on_train_begin=on_train_begin, on_train_end=on_train_end,
                             on_train_batch_begin=on_train_batch_begin,
                             on_train_batch_end=on_train_batch_end, **kw).items():
            if fn is not None:
                setattr(self, name, fn)


class TensorBoard(Callback):
    """Event files TensorBoard reads: log_dir/train (epoch_loss, epoch_accuracy, and with
    update_freq='batch' or N the batch_ scalars, plus the chip's step_cycles and
    mxu_utilization) and log_dir/validation (epoch_loss, epoch_accuracy). histogram_freq=K: every
    K-th epoch each weight's histogram and its last step's gradient (the model is compiled to
    keep them). write_graph: the compiled training graph as a GraphDef (the Graphs tab)."""

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0,
                 embeddings_freq=0, embeddings_metadata=None):
        super().__init__()
        if write_images or embeddings_freq or profile_batch:
            raise ValueError("TensorBoard: write_images, embeddings and profile_batch are not "
                             "supported (the step's cycle report is the profile)")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq, self.write_graph = histogram_freq, write_graph
        self.update_freq = update_freq
        self.needs_gradients = histogram_freq > 0
        self.step = 0

    def on_train_begin(self, logs=None):
        self.train = core.EventWriter(os.path.join(self.log_dir, "train"))
        self.val = None
        if self.write_graph and self.model._cpp is not None and hasattr(self.model._cpp,
                                                                        "graph_def"):
            self.train.add_graph(self.model._cpp.graph_def())
            self.train.flush()

    def on_train_batch_end(self, batch, logs=None):
        step_logs = getattr(self.model, "_last_step_logs", {})
        s = step_logs.get("step", self.step)
        self.step = s + 1
        every = 1 if self.update_freq == "batch" else self.update_freq
        if isinstance(every, int) and (s + 1) % every == 0:
            for k, v in (logs or {}).items():
                self.train.add_scalar("batch_" + k, s, float(v))
            if step_logs.get("cycles"):
                self.train.add_scalar("step_cycles", s, float(step_logs["cycles"]))
                self.train.add_scalar("mxu_utilization", s, float(step_logs["mxu_utilization"]))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        for k, v in logs.items():
            if k.startswith("val_"):
                if self.val is None:
                    self.val = core.EventWriter(os.path.join(self.log_dir, "validation"))
                self.val.add_scalar("epoch_" + k[4:], epoch, float(v))
            else:
                self.train.add_scalar("epoch_" + k, epoch, float(v))
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            self._histograms(epoch)
        self.train.flush()
        if self.val is not None:
            self.val.flush()

    def _histograms(self, epoch):
        names = _weight_names(self.model)
        for name, w in zip(names, self.model.get_weights()):
            self.train.add_histogram(name, epoch, np.asarray(w, np.float32).ravel())
        for name, g in zip(names, self.model._cpp.get_gradients()):
            self.train.add_histogram(name + "/gradient", epoch, np.asarray(g, np.float32).ravel())

    def on_train_end(self, logs=None):
        self.train.sync()
        if self.val is not None:
            self.val.sync()


def _weight_names(model):
    from tessera.keras import layers as L
    names = []
    for layer in model.layers:
        if isinstance(layer, (L.Conv2D, L.Dense)):
            names += [f"{layer.name}/kernel_0", f"{layer.name}/bias_0"]
    return names
