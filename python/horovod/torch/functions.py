"""Horovod's helpers for models, optimizers and Python objects: broadcast_parameters,
broadcast_optimizer_state, broadcast_object, allgather_object.

How it works: they are made of horovod.torch's own named collectives (mpi_ops), so they are
matched by name with the other ranks' calls like every other call. A model's tensors travel as
one asynchronous broadcast each, named after the parameter, all waited for at the end; an
object travels pickled (torch.save: tensors too) as a broadcast of its length and one of its
bytes; an optimizer's state travels as an object, after a step with zero gradients has made
the state where it was empty (the parameters restored afterwards, the zero gradients kept, as
Horovod leaves them).
"""

import io
import pickle

import torch

from . import mpi_ops as ops
from .mpi_ops import global_process_set


def _named(params):
    if isinstance(params, dict):
        return sorted(params.items())
    if not hasattr(params, "__iter__"):
        raise ValueError(f"invalid params of type: {type(params)}")
    items = list(params)
    if items and isinstance(items[0], tuple):
        return items
    return [(f"param.{i}", p) for i, p in enumerate(items)]


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Copies root_rank's tensors into every rank's, in place: a model's state_dict(),
    named_parameters() or parameters()."""
    handles, copies = [], []
    with torch.no_grad():
        for name, p in _named(params):
            if p is None:
                continue
            target = p.data if isinstance(p, torch.nn.Parameter) else p
            work = target if target.is_contiguous() else target.contiguous()
            copies.append((target, work))
            handles.append(ops.broadcast_async_(work, root_rank, f"parameter.{name}",
                                                process_set))
        for h in handles:
            ops.synchronize(h)
        for target, work in copies:
            if work.data_ptr() != target.data_ptr():
                target.copy_(work)


def _bytes_of(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj on every member (any picklable object; tensors travel too)."""
    name = name or type(obj).__name__
    me = ops.rank()
    data = _bytes_of(obj) if me == root_rank else torch.zeros(0, dtype=torch.uint8)
    length = torch.tensor([data.numel()], dtype=torch.int64)
    ops.broadcast_(length, root_rank, f"{name}.length", process_set)
    if me != root_rank:
        data = torch.zeros(int(length[0]), dtype=torch.uint8)
    ops.broadcast_(data, root_rank, f"{name}.data", process_set)
    if me == root_rank:
        return obj
    return torch.load(io.BytesIO(data.numpy().tobytes()), weights_only=False)


def allgather_object(obj, name=None, process_set=global_process_set):
    """A list of every member's obj, by member (any picklable object)."""
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    everyone, lengths = ops.gathered_rows(data, name or type(obj).__name__, process_set)
    out, start = [], 0
    for length in lengths:
        out.append(pickle.loads(everyone[start:start + length].numpy().tobytes()))
        start += length
    return out


def _make_state(optimizer):
    """Runs one step with zero gradients where the optimizer has no state yet, restoring the
    parameters afterwards (the state, e.g. momentum buffers, then exists on every rank)."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    if optimizer.state or not params:
        return
    saved = [p.detach().clone() for p in params]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    step = getattr(optimizer, "skip_synchronize", None)
    if step is not None:
        with optimizer.skip_synchronize():
            optimizer.step()
    else:
        optimizer.step()
    with torch.no_grad():
        for p, value in zip(params, saved):
            p.copy_(value)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Gives every rank root_rank's optimizer state (state_dict(): buffers, steps, rates)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    _make_state(optimizer)
    state = broadcast_object(optimizer.state_dict(), root_rank, "optimizer_state", process_set)
    if ops.rank() != root_rank:
        optimizer.load_state_dict(state)
