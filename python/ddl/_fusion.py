"""ddl._fusion: gradient averaging that overlaps the backward pass (tensor fusion), shared by
ddl.torch.DistributedOptimizer and horovod.torch.DistributedOptimizer.

How it works: at construction the parameters that require gradients are cut into buckets in
reverse order (the last layers' gradients are ready first): the first bucket holds up to 1 MiB,
each next one up to twice the previous, up to the fusion threshold (HOROVOD_FUSION_THRESHOLD
bytes, default 64 MiB, as Horovod; 0: one tensor per bucket). Every parameter gets a hook on
its gradient accumulator, which runs once its .grad is complete in a backward pass. When the
hooks of a whole bucket have run (on the backward_passes_per_step-th pass) and every earlier
bucket has started, the bucket's reduction is queued on ddl's worker thread (ddl._worker): one
ddl.allreduce_n over its gradients (libddl fuses them), compressed and scaled as asked, the
result written back into each .grad, while autograd goes on computing the earlier layers.
Buckets start strictly in bucket order, so every rank issues the same calls in the same order
whatever order its hooks ran in; each is named ("ddl.fusion.<R>.<B>": bucket B of the R-th
reducer) and matched by that name with the other ranks' (ddl._negotiate), so that Horovod's
named asynchronous calls made meanwhile cannot be paired with a bucket, with a signature (the
op, and the dtypes as sent, shapes and sparsity of its gradients) every rank's bucket of that
name must match; a rank that has joined (ddl._negotiate.join) stands in for a bucket of dense
gradients.
synchronize() starts the buckets not yet started (a missing .grad counts as zeros) and waits for
all of them; it raises the first error a reduction raised. Sparse gradients (nn.Embedding(
sparse=True)) are reduced in their bucket's call by allgathering their indices and values
(their rows added up, averaged for "avg"), or, with sparse_as_dense, densified, reduced with the
rest and made sparse again.
"""

import itertools
import os

import torch

from . import _negotiate, allgatherv, allreduce_n, size

__all__ = ["GradientReducer", "fusion_threshold"]

_FIRST_BUCKET = 1 << 20
_DEFAULT_THRESHOLD = 64 << 20
_reducers = itertools.count()
TOO_MANY_PASSES = ("Gradients were computed more than backward_passes_per_step times before "
                   "call to step(). Increase backward_passes_per_step to accumulate gradients "
                   "locally.")


def fusion_threshold():
    """HOROVOD_FUSION_THRESHOLD in bytes (default 64 MiB); ValueError naming a bad value."""
    text = os.environ.get("HOROVOD_FUSION_THRESHOLD", "")
    if not text:
        return _DEFAULT_THRESHOLD
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"HOROVOD_FUSION_THRESHOLD={text!r}: a byte count >= 0 is needed "
                         "(0: no fusion; default 67108864)")
    return value


def plan_buckets(params, threshold):
    """params cut into lists, last parameter first, growing from 1 MiB to threshold bytes."""
    buckets, current, filled = [], [], 0
    cap = min(_FIRST_BUCKET, threshold)
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        if current and (threshold == 0 or filled + nbytes > cap):
            buckets.append(current)
            current, filled, cap = [], 0, min(cap * 2, threshold)
        current.append(p)
        filled += nbytes
    if current:
        buckets.append(current)
    return buckets


class GradientReducer:
    """Reduces the .grad of `params` over every rank, bucket by bucket, as backward goes.

    op: a ddl op ("avg", "sum", "min", "max", "prod"); predivide: gradients are multiplied by
    1/predivide before a sum and by predivide/size() after (op "avg" only); compression: an
    object with compress(t) -> (t, ctx) and decompress(t, ctx) (Horovod's Compression)."""

    def __init__(self, params, op="avg", passes=1, predivide=1.0, compression=None,
                 threshold=None, group=None, sparse_as_dense=False, submit=None):
        self.params = [p for p in params if p.requires_grad]
        self.op, self.passes, self.predivide = op, passes, predivide
        self.compression, self.group, self.sparse_as_dense = compression, group, sparse_as_dense
        self._submit = submit or _negotiate.submit
        self.buckets = plan_buckets(self.params, fusion_threshold()
                                    if threshold is None else threshold)
        self._bucket_of = {p: i for i, b in enumerate(self.buckets) for p in b}
        self._name = f"ddl.fusion.{next(_reducers)}"
        self._accumulators = []  # kept alive: a hook lives as long as its node
        for p in self.params:
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._hook_for(p))
            self._accumulators.append(accumulator)
        self.handles = []  # one per started bucket, in bucket order
        self.reset()

    def reset(self):
        """Forgets the hooks' counts (after synchronize(), or a loaded state)."""
        self.handles.clear()
        self._delay = {p: self.passes for p in self.params}
        self._missing = [len(b) for b in self.buckets]

    def pending(self):
        """True between a bucket's start and synchronize()."""
        return bool(self.handles)

    def _hook_for(self, p):
        def hook(*unused):
            del unused
            if self._delay[p] <= 0:
                raise AssertionError(TOO_MANY_PASSES)
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._missing[self._bucket_of[p]] -= 1
                self._start_ready()

        return hook

    def _start_ready(self):
        """Starts the buckets, in order, whose gradients are all ready."""
        while len(self.handles) < len(self.buckets) and not self._missing[len(self.handles)]:
            self._start(self.buckets[len(self.handles)])

    def _start(self, bucket):
        sparse = []
        for p in bucket:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            elif p.grad.is_sparse and self.sparse_as_dense:
                p.grad = p.grad.to_dense()
                sparse.append(p)
        name = f"{self._name}.{len(self.handles)}"
        sig = self._signature(bucket)
        self.handles.append(self._submit(name, lambda: self._reduce(bucket, sparse), sig,
                                         self.group))

    def _signature(self, bucket):
        """What every rank's bucket of one name must agree on: of kind "allreduce" (the
        gradients' dtypes as sent and shapes, the op: what a joined rank stands in for with
        zeros, ddl._negotiate.join) when they are all dense, "fusion" with sparse ones."""
        op = "sum" if self.predivide != 1.0 else self.op
        grads = tuple((self._wire_dtype(p.grad), tuple(p.shape)) for p in bucket)
        if any(p.grad.is_sparse for p in bucket):
            return ("fusion", op, grads, tuple(p.grad.is_sparse for p in bucket))
        return ("allreduce", grads, op, "fusion")

    def _reduce(self, bucket, resparse=()):
        """On the worker thread: one fused allreduce of the bucket's dense gradients, in place,
        then its sparse ones; gradients densified for it become sparse again."""
        self._reduce_dense([p for p in bucket if not p.grad.is_sparse])
        for p in bucket:
            if p.grad.is_sparse:
                p.grad = self._reduce_sparse(p.grad)
        for p in resparse:
            p.grad = p.grad.to_sparse()

    def _reduce_sparse(self, grad):
        """Every rank's rows of a sparse gradient, added up (averaged for "avg")."""
        g = grad.coalesce()
        indices = allgatherv(g.indices().t().contiguous(), group=self.group)
        values = allgatherv(g.values().contiguous(), group=self.group)
        if self.op == "avg":
            values = values / (size() if self.group is None else self.group.size())
        return torch.sparse_coo_tensor(indices.t(), values, g.size()).coalesce()

    def _reduce_dense(self, bucket):
        op, pre, post = self.op, 1.0, 1.0
        if self.predivide != 1.0:
            n = size() if self.group is None else self.group.size()
            op, pre, post = "sum", 1.0 / self.predivide, self.predivide / n
        grads = [p.grad for p in bucket]
        packed = [self._compress(g if g.is_contiguous() else g.contiguous()) for g in grads]
        tensors = [t for t, _ in packed]
        if pre != 1.0:
            for t in tensors:
                t.mul_(pre)
        allreduce_n(tensors, op=op, group=self.group)
        for grad, tensor, (_, ctx) in zip(grads, tensors, packed):
            if post != 1.0:
                tensor.mul_(post)
            result = self.compression.decompress(tensor, ctx) if self.compression else tensor
            if result.data_ptr() != grad.data_ptr():
                grad.copy_(result)

    def _wire_dtype(self, grad):
        """The name of the dtype `grad` is reduced in (after compression), e.g. "float16"."""
        dtype = grad.dtype
        if self.compression and not grad.is_sparse:
            dtype = self.compression.compress(torch.empty(0, dtype=dtype))[0].dtype
        return str(dtype).replace("torch.", "")

    def _compress(self, tensor):
        return self.compression.compress(tensor) if self.compression else (tensor, None)

    def synchronize(self):
        """Starts every bucket not yet started, waits for all; raises the first error."""
        while len(self.handles) < len(self.buckets):
            self._start(self.buckets[len(self.handles)])
        try:
            for handle in self.handles:
                handle.wait()
        finally:
            self.reset()
