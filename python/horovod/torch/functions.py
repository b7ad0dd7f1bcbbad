"""Horovod's helpers for models, optimizers and Python objects: broadcast_parameters,
broadcast_optimizer_state, broadcast_object, allgather_object (the first three are
ddl.torch's)."""

import pickle

import torch

import ddl.torch as _dt

from .mpi_ops import _check, gather_rows, global_process_set


def broadcast_parameters(params, root_rank):
    """Copies root_rank's tensors into every rank's, in place: a model's state_dict() or
    named_parameters()."""
    if not isinstance(params, dict) and not hasattr(params, "__iter__"):
        raise ValueError(f"invalid params of type: {type(params)}")
    _check(None, global_process_set, "broadcast_parameters")
    _dt.broadcast_parameters(params, root_rank)


def broadcast_optimizer_state(optimizer, root_rank):
    """Gives every rank root_rank's optimizer state (state_dict(): buffers, steps, rates)."""
    _check(None, global_process_set, "broadcast_optimizer_state")
    _dt.broadcast_optimizer_state(optimizer, root_rank)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj on every rank (any picklable object; tensors travel too)."""
    del name
    _check(None, process_set, "broadcast_object")
    return _dt.broadcast_object(obj, root_rank)


def allgather_object(obj, name=None, process_set=global_process_set):
    """A list of every rank's obj, by rank (any picklable object)."""
    del name
    _check(None, process_set, "allgather_object")
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    everyone, lengths = gather_rows(data)
    out, start = [], 0
    for length in lengths:
        out.append(pickle.loads(everyone[start:start + length].numpy().tobytes()))
        start += length
    return out
