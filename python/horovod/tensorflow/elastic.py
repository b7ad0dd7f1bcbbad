"""horovod.tensorflow.elastic on libddl: Horovod's elastic state objects, for scripts written
for Horovod's elastic mode, run under ddlrun.

How it works: a state holds the training's variables and plain attributes (batch=, epoch=, ...).
commit() keeps a copy of them; restore() puts the last copy back; sync() gives every rank root
rank 0's (the variables by broadcast_variables, the attributes by broadcast_object) and keeps
that as the copy. hvd.elastic.run(func) syncs the state and runs func(state): on ddlrun a lost
rank or host ends the job, and `ddlrun --max-restarts N --min-hosts M` starts it again on the
hosts left, so the script resumes from what it saved, not in the same process (Horovod's
in-process reset and host-change notices are not provided).
"""

import functools

import ddl

__all__ = ["ObjectState", "TensorFlowState", "TensorFlowKerasState", "run"]


class ObjectState:
    """Plain attributes (keyword arguments) kept, restored and synced from rank 0."""

    def __init__(self, **kwargs):
        self._saved_state = dict(kwargs)
        self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        from . import broadcast_object  # noqa: PLC0415 (the package imports this module)

        if self._saved_state:
            self._saved_state = broadcast_object(self._saved_state, 0)
            self._set_attrs()

    def commit(self):
        self.save()

    def check_host_updates(self):
        """Horovod's host-change check: ddlrun restarts the job instead, so never a change."""


class TensorFlowState(ObjectState):
    """TensorFlow variables (eager) and plain attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise ValueError("hvd.elastic.TensorFlowState(session=...): graph-mode elastic "
                             "state is not provided on libddl; use eager TensorFlow 2")
        self.variables = list(variables or [])
        self._values = [v.numpy() for v in self.variables]
        super().__init__(**kwargs)

    def save(self):
        self._values = [v.numpy() for v in self.variables]
        super().save()

    def restore(self):
        for variable, value in zip(self.variables, self._values):
            variable.assign(value)
        super().restore()

    def sync(self):
        from . import broadcast_variables  # noqa: PLC0415

        if self.variables:
            broadcast_variables(self.variables, 0)
        self._values = [v.numpy() for v in self.variables]
        super().sync()


class TensorFlowKerasState(ObjectState):
    """A Keras model (and optimizer) and plain attributes."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        del backend
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self._weights = model.get_weights()
        super().__init__(**kwargs)

    def _variables(self):
        from ddl.keras import model_variables, optimizer_variables  # noqa: PLC0415

        variables = model_variables(self.model)
        if self.optimizer is not None and self.optimizer is not getattr(self.model, "optimizer",
                                                                        None):
            variables += optimizer_variables(self.optimizer)
        return variables

    def save(self):
        self._weights = self.model.get_weights()
        super().save()

    def restore(self):
        self.model.set_weights(self._weights)
        super().restore()

    def sync(self):
        from . import broadcast_variables  # noqa: PLC0415

        broadcast_variables(self._variables(), 0)
        self._weights = self.model.get_weights()
        super().sync()


def run(func):
    """func(state, ...) run after state.sync() (every rank starts from rank 0's state)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        ddl.init()
        state.sync()
        return func(state, *args, **kwargs)

    return wrapper
