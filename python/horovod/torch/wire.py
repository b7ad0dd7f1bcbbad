"""What horovod.torch's collectives send and how each runs on ddl's worker thread.

How it works: every collective is a function run on ddl's worker thread once the negotiator has
matched the ranks' calls (horovod.common.controller); this module holds those functions and the
tensors they move. Data that is only moved (allgather, broadcast, alltoall) travels as its raw
bytes (a uint8 view), so every dtype works. Reduced data travels in its own dtype (libddl
reduces float32/64, float16, bfloat16, int8/16/32/64, uint8, uint16 and bool). Scale factors
apply before and after the reduction in float64 for integers and float32 for float16 (Horovod's
rules), in place otherwise.
"""

import math

import torch

import ddl

_REDUCED = list(ddl._TYPES)  # libddl's, by name


_NAMES = {}  # torch dtype -> its name without "torch." (str() costs a microsecond a call)


def dtype_name(dtype):
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def reduce_dtype(dtype, what):
    """dtype, when libddl reduces it; TypeError naming `what` otherwise."""
    if dtype_name(dtype) in _REDUCED:
        return dtype
    raise TypeError(f"hvd.{what}: dtype {dtype_name(dtype)} cannot be reduced (it takes "
                    f"{', '.join(_REDUCED[:-1])} and {_REDUCED[-1]})")


def _scale(tensor, factor):
    """tensor * factor in Horovod's arithmetic (float64 for integers, float32 for float16)."""
    if factor == 1.0:
        return tensor
    if not tensor.dtype.is_floating_point:
        return (tensor.to(torch.float64) * factor).to(tensor.dtype)
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return (tensor.float() * factor).to(tensor.dtype)
    return tensor.mul_(factor)


def allreduce_fn(tensors, op, pre, post, group):
    """A function that reduces `tensors` in place (one fused ddl.allreduce_n) and returns
    them (a joined rank stands in with controller.stand_in: the same call on zeros)."""

    def run():
        wires = []
        for t in tensors:
            scaled = _scale(t, pre)
            wires.append(scaled.to(reduce_dtype(t.dtype, "allreduce")).contiguous())
        ddl.allreduce_n(wires, op=op, group=group)
        for t, w in zip(tensors, wires):
            result = _scale(w.to(t.dtype) if w.dtype != t.dtype else w, post)
            if result.data_ptr() != t.data_ptr():
                t.copy_(result)
        return tensors

    return run


def as_bytes(tensor):
    """tensor's data as a (rows, row bytes) uint8 tensor (a 0-d tensor is one row)."""
    flat = tensor.contiguous().reshape(-1).view(torch.uint8)
    rows = tensor.shape[0] if tensor.dim() else 1
    return flat.reshape(rows, -1) if rows else flat.reshape(0, row_bytes(tensor))


def row_bytes(tensor):
    return math.prod(tensor.shape[1:]) * tensor.element_size()


def from_bytes(data, dtype, rest):
    """Rows of bytes back into a tensor of `dtype` whose dimensions after the first are rest."""
    return data.reshape(-1).view(dtype).reshape((-1,) + tuple(rest))


def gather_fn(tensors, group):
    """A function that allgathers each tensor (first dimensions may differ) and returns
    [(gathered, rows of every member)]."""

    def run():
        out = []
        for t in tensors:
            rows = ddl.allgather(torch.tensor([t.shape[0] if t.dim() else 1]),
                                 group=group).tolist()
            data = ddl.allgatherv(as_bytes(t), group=group) if sum(rows) else as_bytes(t)
            rest = t.shape[1:] if t.dim() else ()
            out.append((from_bytes(data, t.dtype, rest), rows))
        return out

    return run


def broadcast_fn(tensor, root, group):
    """A function that copies the group member root's tensor into `tensor` in place."""

    def run():
        data = as_bytes(tensor)
        if data.numel():
            ddl.broadcast(data, root, group=group)
        if data.data_ptr() != tensor.data_ptr():
            tensor.copy_(from_bytes(data, tensor.dtype, tensor.shape[1:]).reshape(tensor.shape))
        return tensor

    return run


def alltoall_fn(tensor, splits, group):
    """A function that sends splits[r] rows to member r; returns (rows received, counts)."""

    def run():
        counts = ddl.alltoall(torch.tensor(splits, dtype=torch.int64), group=group).tolist()
        row = row_bytes(tensor)
        data = as_bytes(tensor)
        got = ddl.alltoallv(data, [s * row for s in splits], [c * row for c in counts],
                            group=group)
        return from_bytes(got, tensor.dtype, tensor.shape[1:]), torch.tensor(counts,
                                                                            dtype=torch.int32)

    return run


def scatter_counts(rows, n):
    """Rows of each member in a reducescatter: the first rows % n members get one more."""
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def reducescatter_fn(tensors, op, pre, post, group, me, n):
    """A function that reduces each tensor over the group and returns this member's rows."""

    def run():
        out = []
        for t in tensors:
            wire = _scale(t, pre).to(reduce_dtype(t.dtype, "reducescatter")).contiguous()
            counts = scatter_counts(t.shape[0], n)
            if t.shape[0] % n == 0:
                part = ddl.reduce_scatter(wire, op=op, group=group)
            else:
                start = sum(counts[:me])
                part = ddl.allreduce(wire, op=op, group=group)[start:start + counts[me]].clone()
            out.append(_scale(part.to(t.dtype), post))
        return out

    return run
