"""hvd.DistributedOptimizer: gradients averaged over the ranks while the backward pass runs.

How it works: DistributedOptimizer(opt, ...) returns an optimizer of a new subclass of opt's
class (as Horovod does, so isinstance checks and learning-rate schedulers work) over opt's
param_groups, whose reduction is ddl._fusion.GradientReducer, the code ddl.torch's optimizer
uses: hooks on the gradient accumulators start a fused allreduce of each bucket of gradients
(up to HOROVOD_FUSION_THRESHOLD bytes) on ddl's worker thread as soon as the bucket is ready,
and step() (or synchronize()) waits for the rest before the wrapped update. The buckets are
submitted through horovod.common.controller (named, with their gradients' dtypes and shapes as
signature) in the process set's group, so a mismatch raises on every rank and the job goes on.
"""

import warnings
from contextlib import contextmanager

import torch

from ddl._fusion import GradientReducer

from ..common import controller
from ..common.process_sets import group_of
from .compression import Compression
from .mpi_ops import DDL_OPS, Average, global_process_set, resolve_op

ZERO_GRAD_RACE = ("optimizer.zero_grad() was called after loss.backward() but before "
                  "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                  "cause a race condition.")
STEP_AFTER_SYNCHRONIZE = ("optimizer.step() called without optimizer.skip_synchronize() context "
                          "after optimizer.synchronize(). This can cause training slowdown. You "
                          "may want to consider using optimizer.skip_synchronize() context if you "
                          "use optimizer.synchronize() in your code.")


def _check_names(named_parameters, param_groups):
    """Horovod's checks of named_parameters: (name, parameter) tuples, unique, covering all."""
    if named_parameters is None:
        return
    named = list(named_parameters)
    if any(not isinstance(item, tuple) for item in named):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    names = [name for name, _ in named]
    dups = sorted({name for name in names if names.count(name) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: "
                         + ", ".join(dups))
    unnamed = {id(p) for g in param_groups for p in g["params"]} - {id(p) for _, p in named}
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters were "
                         "not named. Python object ids: " + ", ".join(str(i) for i in unnamed))


def _parameter_names(named_parameters, param_groups):
    """{parameter: name}: the names given, else "allreduce.noname.<group>.<index>"."""
    if named_parameters is not None:
        return {p: name for name, p in named_parameters}
    return {p: f"allreduce.noname.{i}.{j}" for i, g in enumerate(param_groups)
            for j, p in enumerate(g["params"])}


def _submit(name, fn, sig, group):
    """A bucket's reduction through the controller (a rank that has joined stands in for it
    where its signature is of kind "allreduce": dense gradients)."""
    return controller.run("allreduce", name, fn, sig, group)


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        named = None if named_parameters is None else list(named_parameters)
        _check_names(named, self.param_groups)
        self._parameter_names = _parameter_names(named, self.param_groups)
        self.backward_passes_per_step = backward_passes_per_step
        self.process_set = process_set
        member = process_set.included()
        self._reducer = GradientReducer(
            [p for g in self.param_groups for p in g["params"]] if member else [],
            op=DDL_OPS[resolve_op(op)],
            passes=backward_passes_per_step, predivide=gradient_predivide_factor,
            compression=compression,
            group=group_of(process_set, "DistributedOptimizer") if member else None,
            sparse_as_dense=sparse_as_dense, submit=_submit)
        self._synchronized, self._should_synchronize = False, True

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = self._reducer.passes = passes
        self._reducer.reset()

    def synchronize(self):
        """Waits until every gradient is reduced (starting the buckets not yet started)."""
        self._reducer.synchronize()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside does not synchronize (after an explicit synchronize())."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(STEP_AFTER_SYNCHRONIZE)
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._reducer.pending():
            raise AssertionError(ZERO_GRAD_RACE)
        return super(self.__class__, self).zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self._reducer.reset()
        self._synchronized, self._should_synchronize = False, True
        return super(self.__class__, self).load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """An optimizer like `optimizer` (same class, same param_groups) that averages (op) the
    gradients over the process set's ranks, overlapping the backward pass (on a rank outside
    the set, the wrapped optimizer alone: its own gradients, as Horovod's). num_groups and
    groups are accepted (buckets group the gradients here); sparse gradients are reduced as
    such, or densified with sparse_as_dense=True."""
    del num_groups, groups
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    resolve_op(op, None, "DistributedOptimizer")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, sparse_as_dense, process_set)
