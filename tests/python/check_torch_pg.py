"""The C++ torch.distributed backend "ddl" (ddl._torch_pg) op by op, as an N-rank job.

How it works: init_process_group("ddl"), then every collective torch.distributed routes to a
ProcessGroup (all_reduce with each ReduceOp, all_reduce_coalesced, reduce, broadcast,
all_gather, all_gather_into_tensor, gather, scatter, reduce_scatter, reduce_scatter_tensor,
barrier) on every dtype the backend takes, on contiguous and non-contiguous tensors. Rank r's values are small integers, so every
result is exact in every dtype (float16 and bfloat16 included). Then the work objects: async
calls return before the peers have joined (rank 1 sleeps first) except small ones (up to
64 KiB, run inline on the calling thread: complete when returned), wait in any order, run in the
order issued, and their futures hold the outputs and take .then() callbacks; DDP with the
fp16_compress_hook comm hook (a future chain) trains to identical weights. Then errors: what the
backend refuses (dtype, op, sizes) and what libddl refuses (a root that is not a rank) become
RuntimeErrors with their text, and the group still works afterwards. Each rank prints
"rank R of N ok".
"""

import sys
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import ddl.torch  # noqa: F401  (registers the backend "ddl")
from ddl import _torch_pg

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8, torch.int16]
COUNTS = (1, 7, 100003)


def fail(what):
    sys.exit(f"rank {dist.get_rank()}: {what}")


def expect(what, got, want):
    if not torch.equal(got.to(torch.float64), want.to(torch.float64)):
        fail(f"{what}: got {got.reshape(-1)[:6].tolist()} want {want.reshape(-1)[:6].tolist()}")


def strided(values, dtype):
    """values as a non-contiguous tensor of dtype (every other element of a larger one)."""
    base = torch.zeros(2 * values.numel(), dtype=dtype)
    view = base[::2]
    view.copy_(values.to(dtype))
    assert values.numel() < 2 or not view.is_contiguous()
    return view


def check_allreduce(rank, n):
    for dtype in DTYPES:
        for count in COUNTS:
            k = torch.arange(count, dtype=torch.int64) % 5
            x = 2 * rank + k + 1  # rank r's values: sum, avg, min and max are exact integers
            wants = {
                "SUM": n * (n - 1) + n * (k + 1),
                "AVG": (n - 1) + (k + 1),
                "MIN": k + 1,
                "MAX": 2 * (n - 1) + k + 1,
            }
            for op, want in wants.items():
                for make in (lambda v: v.to(dtype, copy=True), lambda v: strided(v, dtype)):
                    t = make(x)
                    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                    expect(f"all_reduce {op} {dtype} n={count} contiguous={t.is_contiguous()}",
                           t, want)
            y = 1 + (torch.arange(count) + rank) % 2  # 1 or 2: the product is a power of two
            ones = sum((torch.arange(count) + r) % 2 for r in range(n))
            t = y.to(dtype, copy=True)
            dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
            expect(f"all_reduce PRODUCT {dtype} n={count}", t, 2 ** ones)


def check_other_ops(rank, n):
    for dtype in DTYPES:
        # all_reduce_coalesced: one fused call over tensors of several sizes.
        ts = [torch.full((c,), rank + 1, dtype=dtype) for c in (3, 1000, 1)]
        dist.all_reduce_coalesced(ts)
        for t in ts:
            expect(f"all_reduce_coalesced {dtype}", t, torch.full(t.shape, n * (n + 1) // 2))
        # reduce: only the root's tensor changes.
        for root in (0, n - 1):
            t = torch.full((5,), rank + 1, dtype=dtype)
            dist.reduce(t, dst=root)
            want = n * (n + 1) // 2 if rank == root else rank + 1
            expect(f"reduce {dtype} root {root}", t, torch.full((5,), want))
        # broadcast from every root, contiguous and not.
        for root in range(n):
            for t in (torch.full((9,), rank, dtype=dtype), strided(torch.full((9,), rank), dtype)):
                dist.broadcast(t, src=root)
                expect(f"broadcast {dtype} root {root}", t, torch.full((9,), root))
        # all_gather into a list (shaped outputs) and all_gather_into_tensor into one tensor.
        mine = (torch.arange(6) % 3 + rank).reshape(2, 3)
        parts = [torch.zeros(2, 3, dtype=dtype) for _ in range(n)]
        dist.all_gather(parts, mine.to(dtype))
        for r, part in enumerate(parts):
            expect(f"all_gather {dtype} part {r}", part, (torch.arange(6) % 3 + r).reshape(2, 3))
        flat = torch.zeros(n * 6, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine.to(dtype))
        expect(f"all_gather_into_tensor {dtype}", flat,
               torch.cat([torch.arange(6) % 3 + r for r in range(n)]))
        # gather and scatter, to and from the first and the last rank.
        for root in (0, n - 1):
            parts = [torch.zeros(2, 3, dtype=dtype) for _ in range(n)] if rank == root else None
            dist.gather(mine.to(dtype), parts, dst=root)
            for r, part in enumerate(parts or []):
                expect(f"gather {dtype} root {root} part {r}", part,
                       (torch.arange(6) % 3 + r).reshape(2, 3))
            out = torch.zeros(2, 3, dtype=dtype)
            parts = ([torch.full((2, 3), 2 * r + root, dtype=dtype) for r in range(n)]
                     if rank == root else None)
            dist.scatter(out, parts, src=root)
            expect(f"scatter {dtype} root {root}", out, torch.full((2, 3), 2 * rank + root))
        # reduce_scatter: rank r's input i is (i + 1) * (r + 1); this rank gets chunk `rank`.
        inputs = [torch.full((4,), (i + 1) * (rank + 1), dtype=dtype) for i in range(n)]
        out = torch.zeros(4, dtype=dtype)
        dist.reduce_scatter(out, inputs)
        expect(f"reduce_scatter {dtype}", out, torch.full((4,), (rank + 1) * n * (n + 1) // 2))
        out = torch.zeros(4, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(inputs))
        expect(f"reduce_scatter_tensor {dtype}", out,
               torch.full((4,), (rank + 1) * n * (n + 1) // 2))
    dist.barrier()


def check_inline(rank, n):
    """A small all_reduce runs on the calling thread (complete when returned, async or not); a
    large one goes to the worker and returns at once while rank 1 is still asleep."""
    small, large = torch.ones(16 * 1024), torch.ones(64 * 1024 + 1)
    for tensor, inline in ((small, True), (large, False)):
        dist.barrier()
        if rank == 1:
            time.sleep(0.5)
        work = dist.all_reduce(tensor, async_op=True)
        if rank == 0 and work.is_completed() != inline:
            fail(f"an async all_reduce of {tensor.numel() * 4} bytes was "
                 f"{'not ' if inline else ''}complete when returned")
        work.wait()
        expect(f"all_reduce of {tensor.numel()} float32", tensor, torch.full_like(tensor, n))


def check_work(rank, n):
    # Asynchronous: rank 0's barrier is queued and returned while rank 1 is still asleep.
    if rank == 1:
        time.sleep(1.0)
    work = dist.barrier(async_op=True)
    if rank == 0 and work.is_completed():
        fail("an async barrier was complete before rank 1 joined it")
    work.wait()
    assert work.is_completed()

    # Works run in the order issued; waiting on the last one or in reverse order is enough.
    t = torch.full((1000,), float(rank))
    works = [dist.all_reduce(t, async_op=True),                    # sum of ranks
             dist.broadcast(t, src=n - 1, async_op=True),          # the same everywhere
             dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)]
    others = [torch.full((100,), float(rank + i)) for i in range(8)]
    works += [dist.all_reduce(o, async_op=True) for o in others]
    for w in reversed(works):
        w.wait()
    expect("async all_reduce, broadcast, all_reduce in order", t,
           torch.full((1000,), float(n * (n - 1) // 2)))
    for i, o in enumerate(others):
        expect(f"async all_reduce {i}", o, torch.full((100,), float(n * (n - 1) // 2 + n * i)))

    # The future holds the outputs and runs callbacks (DDP's comm hooks chain on it).
    t = torch.full((10,), float(rank + 1))
    future = dist.all_reduce(t, async_op=True).get_future()
    doubled = future.then(lambda f: f.value()[0] * 2)
    expect("future value", future.wait()[0], torch.full((10,), float(n * (n + 1) // 2)))
    expect("future then", doubled.wait(), torch.full((10,), float(n * (n + 1))))
    assert future.value()[0] is not None and future.wait()[0].data_ptr() == t.data_ptr()

    # DDP with a comm hook that compresses to fp16 and decompresses in a .then() callback.
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8))
    model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(10 + rank)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(16, 64)).square().mean().backward()
        optimizer.step()
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    highest = weights.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(highest, weights):
        fail("DDP with fp16_compress_hook left different weights on the ranks")


def raises(what, call, text):
    """call() must raise a RuntimeError whose message holds `text`."""
    try:
        call()
    except RuntimeError as e:
        if text not in str(e):
            fail(f"{what}: the error {str(e)!r} does not say {text!r}")
        return str(e)
    fail(f"{what}: no error")


def check_errors(rank, n):
    uint16 = ", uint16" if hasattr(torch, "uint16") else ""  # torch 2.3 on
    # A dtype with no ddl type that reaches the backend: torch 2.3's uint32, else a quantized one.
    if hasattr(torch, "uint32"):
        odd, name = torch.zeros(3, dtype=torch.uint32), "UInt32"
    else:
        odd, name = torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.qint8), "QInt8"
    raises(name, lambda: dist.all_reduce(odd),
           f"ddl backend: allreduce: dtype {name} is not supported (it takes float32, "
           f"float64, float16, bfloat16, int8, int16, int32, int64, uint8{uint16} and bool)")
    raises("BAND", lambda: dist.all_reduce(torch.zeros(3), op=dist.ReduceOp.BAND),
           "ddl backend: allreduce: reduce op band is bitwise: it takes integer and bool types, "
           "not float32")
    raises("all_gather sizes", lambda: dist.all_gather([torch.zeros(3) for _ in range(n)],
                                                       torch.zeros(4)),
           "ddl backend: allgather: an output of 3 Float for an input of 4 Float")
    raises("all_gather count", lambda: dist.all_gather([torch.zeros(3) for _ in range(n + 1)],
                                                       torch.zeros(3)),
           f"ddl backend: allgather: {n + 1} output tensors for {n} ranks")
    raises("reduce_scatter sizes",
           lambda: dist.reduce_scatter(torch.zeros(3), [torch.zeros(4) for _ in range(n)]),
           "ddl backend: reduce_scatter: an input of 4 Float for an output of 3 Float")
    raises("reduce_scatter count",
           lambda: dist.reduce_scatter(torch.zeros(3), [torch.zeros(3) for _ in range(n - 1)]),
           f"ddl backend: reduce_scatter: {n - 1} input tensors for {n} ranks")
    group = dist.distributed_c10d._get_default_group()  # torch.distributed checks dtypes first
    raises("coalesced dtypes",
           lambda: group.allreduce_coalesced([torch.zeros(2), torch.zeros(2, dtype=torch.int64)],
                                             dist.AllreduceCoalescedOptions()),
           "ddl backend: allreduce_coalesced: tensors of dtypes Float and Long; it takes "
           "tensors of one dtype")
    # libddl's own error, raised on the worker thread, comes back from wait() with its text.
    message = raises("root out of range", lambda: dist.broadcast(torch.zeros(3), src=n + 5),
                     f"ddl backend: broadcast: root {n + 5} is not a rank (0..{n - 1})")
    if rank == 0:
        print(f"libddl's error as Python sees it: {message.splitlines()[0]}", flush=True)
    work = dist.broadcast(torch.zeros(3), src=-1, async_op=True)
    raises("async root out of range", work.wait, "broadcast: root -1 is not a rank")
    assert work.is_completed()
    # The group still works.
    t = torch.ones(5)
    dist.all_reduce(t)
    expect("all_reduce after the errors", t, torch.full((5,), float(n)))


def main():
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "torch.distributed.all_reduce_coalesced will be deprecated")
    dist.init_process_group("ddl")
    rank, n = dist.get_rank(), dist.get_world_size()
    group = dist.distributed_c10d._get_default_group()
    # torch 1.x: the group is ddl's ProcessGroup; 2.x: torch's, holding ddl's Backend per device.
    backend = group._get_backend(torch.device("cpu")) if _torch_pg.torch_major >= 2 else group
    assert type(backend) is _torch_pg.ProcessGroupDdl, type(backend)
    assert isinstance(group, dist.ProcessGroup)
    assert (group.rank(), group.size(), dist.get_backend(group)) == (rank, n, "ddl")
    check_allreduce(rank, n)
    check_other_ops(rank, n)
    check_work(rank, n)
    check_inline(rank, n)
    check_errors(rank, n)
    dist.barrier()
    print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()


main()
