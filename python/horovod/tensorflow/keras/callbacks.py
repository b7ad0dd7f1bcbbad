"""Horovod's Keras callbacks on libddl, for tf.keras: Keras 3, or tf-keras (Keras 2) under
TF_USE_LEGACY_KERAS=1.

BroadcastGlobalVariablesCallback(root_rank): when training begins, every rank takes root_rank's
model and optimizer variables. MetricAverageCallback(): at the end of each epoch the logs'
metrics become their mean over the ranks (put it before the callbacks that read them).
LearningRateWarmupCallback(initial_lr, warmup_epochs=5, ...): over the first warmup_epochs the
learning rate grows batch by batch from initial_lr / size() to initial_lr (Goyal et al.), as
Horovod's. LearningRateScheduleCallback(initial_lr, multiplier, start_epoch, end_epoch, ...): from
start_epoch to end_epoch the learning rate is initial_lr * multiplier (a number, or a function of
the epoch, fractional within an epoch unless staircase). All of them turn off Keras' XLA
compilation, which cannot run ddl's ops.
"""

import numpy as np
from tensorflow import keras  # Keras 3, or tf-keras under TF_USE_LEGACY_KERAS=1

import ddl
import ddl.tensorflow as _dtf
from ddl.keras import model_variables

__all__ = ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
           "LearningRateWarmupCallback", "LearningRateScheduleCallback"]


def _value(x):
    """A Keras variable or tensor (either Keras) as a float."""
    return float(x.numpy() if hasattr(x, "numpy") else np.asarray(x))


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Every rank takes root_rank's variables when training begins (but local_variables)."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        del device
        self.root_rank = root_rank
        self.local = {id(v) for v in local_variables or []}

    def on_train_begin(self, logs=None):
        _dtf.no_xla(self.model)
        _dtf.broadcast_variables([v for v in model_variables(self.model) if id(v) not in
                                  self.local], self.root_rank)


class MetricAverageCallback(keras.callbacks.Callback):
    """The epoch's metrics averaged over the ranks at its end."""

    def __init__(self, device=""):
        super().__init__()
        del device

    def on_train_begin(self, logs=None):
        _dtf.no_xla(self.model)

    def on_epoch_end(self, epoch, logs=None):
        _dtf.allreduce_metrics(logs, "avg")


class LearningRateWarmupCallback(keras.callbacks.Callback):
    """The learning rate from initial_lr / size() to initial_lr over warmup_epochs, per batch.

    momentum_correction is accepted and has no effect: a Keras 3 optimizer's momentum is a
    constant of the compiled step."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0, initial_epoch=0):
        super().__init__()
        del momentum_correction
        self.initial_lr, self.warmup_epochs = initial_lr, warmup_epochs
        self.steps_per_epoch, self.verbose = steps_per_epoch, verbose
        self.epoch = initial_epoch

    def on_train_begin(self, logs=None):
        _dtf.no_xla(self.model)
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")
        if not self.steps_per_epoch:
            raise ValueError("hvd.callbacks.LearningRateWarmupCallback: the number of steps "
                             "per epoch is unknown: pass steps_per_epoch=")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        if self.epoch >= self.warmup_epochs:
            return
        progress = (self.epoch + batch / self.steps_per_epoch) / self.warmup_epochs
        size = ddl.size()
        self.model.optimizer.learning_rate = self.initial_lr / size * (progress * (size - 1) + 1)

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.warmup_epochs - 1 and self.verbose and ddl.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{self.initial_lr:g}.")
        if logs is not None:
            logs["lr"] = _value(self.model.optimizer.learning_rate)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """From start_epoch to end_epoch (None: the end) the learning rate is initial_lr *
    multiplier: a number, or a function of the epoch (with staircase=False, of the epoch plus
    the fraction of it done, set at every batch). momentum_correction is accepted and has no
    effect (the optimizer's momentum is a constant of the compiled step)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__()
        del momentum_correction, verbose
        self.initial_lr, self.start_epoch, self.end_epoch = initial_lr, start_epoch, end_epoch
        self.staircase, self.steps_per_epoch = staircase, steps_per_epoch
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.epoch = 0

    def on_train_begin(self, logs=None):
        _dtf.no_xla(self.model)
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        if self._in_range(epoch) and self.staircase:
            self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_batch_begin(self, batch, logs=None):
        if self.staircase or not self._in_range(self.epoch):
            return
        if not self.steps_per_epoch:
            raise ValueError("hvd.callbacks.LearningRateScheduleCallback(staircase=False): the "
                             "number of steps per epoch is unknown: pass steps_per_epoch=")
        epoch = self.epoch + batch / self.steps_per_epoch
        self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _value(self.model.optimizer.learning_rate)
