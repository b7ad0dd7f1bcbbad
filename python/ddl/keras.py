"""ddl.keras: IBM's Keras recipe on libddl, for tf.keras scripts run under ddlrun: Keras 3, or
Keras 2 (tf-keras) where TF_USE_LEGACY_KERAS=1 makes tf.keras tf-keras.

    import ddl
    model.compile(optimizer=keras.optimizers.SGD(0.01 * ddl.size()), loss=...)
    model.fit(x[ddl.rank()::ddl.size()], y[ddl.rank()::ddl.size()],
              callbacks=[ddl.DDLCallback(), ..., ddl.DDLGlobalVariablesCallback()])

How it works: DDLCallback (the first callback) makes the training data-parallel when training
begins: the model's optimizer gets ddl.tensorflow.distribute_optimizer(), so every step's
gradients are averaged over the ranks (one fused allreduce per dtype inside the compiled step)
before they are applied, and XLA (Keras' jit_compile, which cannot run ddl's ops) is turned off;
at the end of every epoch it replaces the logs' metrics by their mean over the ranks, so the
callbacks after it (checkpoints, early stopping, the progress bar) see the same numbers on
every rank. DDLGlobalVariablesCallback (the last callback, after any that loads weights) gives
every rank rank 0's model and optimizer variables when training begins, so the ranks start
alike and, given the same averaged gradients, stay alike. ddl.DDLCallback and
ddl.DDLGlobalVariablesCallback are these classes (`import ddl` loads this module when a script
first names them).
"""

import tensorflow as tf

if not hasattr(tf, "keras"):  # a folder named tensorflow on the path, not TensorFlow
    raise ModuleNotFoundError("No module named 'tensorflow'", name="tensorflow")
keras = tf.keras  # Keras 3, or tf-keras under TF_USE_LEGACY_KERAS=1

from . import tensorflow as ddl_tf

__all__ = ["DDLCallback", "DDLGlobalVariablesCallback", "model_variables",
           "optimizer_variables"]


class DDLCallback(keras.callbacks.Callback):
    """First callback: averages the gradients over the ranks (the model's optimizer) and the
    epoch's metrics (the logs the later callbacks see)."""

    def __init__(self, op="avg"):
        super().__init__()
        self.op = op

    def on_train_begin(self, logs=None):
        ddl_tf.prepare_model(self.model)

    def on_epoch_end(self, epoch, logs=None):
        ddl_tf.allreduce_metrics(logs, self.op)


class DDLGlobalVariablesCallback(keras.callbacks.Callback):
    """Last callback: every rank takes root_rank's model and optimizer variables when training
    begins."""

    def __init__(self, root_rank=0):
        super().__init__()
        self.root_rank = root_rank

    def on_train_begin(self, logs=None):
        ddl_tf.broadcast_variables(model_variables(self.model), self.root_rank)


def model_variables(model):
    """The model's variables, then its optimizer's (when it has made them: Keras 3's and
    tf-keras' `variables` property, tf-keras' legacy optimizers' variables() method)."""
    optimizer = getattr(model, "optimizer", None)
    built = optimizer is not None and getattr(optimizer, "built", True)
    return list(model.variables) + (optimizer_variables(optimizer) if built else [])


def optimizer_variables(optimizer):
    """An optimizer's variables: Keras 3's and tf-keras' `variables` property, tf-keras' legacy
    optimizers' variables() method."""
    more = getattr(optimizer, "variables", None)
    return list(more() if callable(more) else more or [])
