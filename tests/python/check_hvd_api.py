"""horovod.torch on libddl, call by call, in a real job: every call of the surface against what
each rank can compute itself, and the error texts of the refused ones.

How it works: run as an N-rank job (N >= 2); every rank makes the same calls, checks its
results with asserts and prints "rank R of N ok".
"""

import warnings

import torch

import horovod.torch as hvd


def expect(error, text, call, *args, **kwargs):
    """call(*args, **kwargs) raises `error` whose message is exactly `text`."""
    try:
        call(*args, **kwargs)
    except error as e:
        assert str(e) == text, f"{call.__name__}: {str(e)!r} != {text!r}"
        return
    raise AssertionError(f"{call.__name__} did not raise {error.__name__}")


def check_before_init():
    assert not hvd.is_initialized()
    expect(ValueError, "Horovod has not been initialized; use hvd.init().", hvd.rank)
    expect(ValueError, "Horovod has not been initialized; use hvd.init().", hvd.allreduce,
           torch.ones(1))
    expect(ValueError, "hvd.init(comm=...): horovod.torch on libddl takes no MPI communicator; "
           "run the script with ddlrun, which gives every rank its place", hvd.init, comm=[0])


def check_job(r, n):
    assert hvd.is_initialized() and hvd.size() == n and 0 <= r < n
    assert hvd.local_size() == n and hvd.local_rank() == r  # one host
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0 and hvd.is_homogeneous()
    assert hvd.ddl_built() and not hvd.mpi_threads_supported()
    assert not (hvd.nccl_built() or hvd.mpi_built() or hvd.gloo_built())


def check_allreduce(r, n):
    x = torch.full((3, 2), float(r + 1))
    total = n * (n + 1) / 2
    assert torch.equal(hvd.allreduce(x), torch.full((3, 2), total / n))
    assert torch.equal(x, torch.full((3, 2), float(r + 1)))  # left alone
    for op, want in ((hvd.Sum, total), (hvd.Min, 1.0), (hvd.Max, float(n)),
                     (hvd.Product, float(torch.arange(1, n + 1).prod()))):
        assert hvd.allreduce(x, op=op)[0, 0].item() == want, op
    assert hvd.allreduce(x, average=False)[0, 0].item() == total
    y = x.clone()
    assert hvd.allreduce_(y, op=hvd.Sum) is y and y[0, 0].item() == total
    scaled = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert scaled[0, 0].item() == total
    half = hvd.allreduce(x, compression=hvd.Compression.fp16, op=hvd.Sum)
    assert half.dtype == torch.float32 and half[0, 0].item() == total
    handle = hvd.allreduce_async(x, op=hvd.Sum)
    z = x.clone()
    handle_ = hvd.allreduce_async_(z, op=hvd.Max)
    while not hvd.poll(handle_):
        pass
    assert z[0, 0].item() == n  # poll() said done: the result is there
    assert hvd.synchronize(handle_) is z
    assert hvd.synchronize(handle)[0, 0].item() == total
    check_allreduce_autograd(r, n)


def check_allreduce_autograd(r, n):
    w = torch.tensor([float(r + 1)], requires_grad=True)
    (hvd.allreduce(w, op=hvd.Sum) * (r + 1)).sum().backward()
    assert w.grad.item() == n * (n + 1) / 2  # d/dw_r of sum_q (q+1) * sum_p w_p


def check_grouped(r, n):
    a, b = torch.full((4,), float(r)), torch.full((2, 2), 1.0, dtype=torch.float64)
    out = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    assert out[0].tolist() == [n * (n - 1) / 2] * 4 and out[1].dtype == torch.float64
    assert torch.equal(out[1], torch.full((2, 2), float(n), dtype=torch.float64))
    assert a[0].item() == r  # left alone
    hvd.grouped_allreduce_([a, b])
    assert a[0].item() == (n - 1) / 2 and b[0, 0].item() == 1.0
    handle = hvd.grouped_allreduce_async_([a])
    assert hvd.synchronize(handle)[0] is a


def check_allgather(r, n):
    x = torch.full((2, 3), r, dtype=torch.int32)
    assert torch.equal(hvd.allgather(x), torch.arange(n, dtype=torch.int32).repeat_interleave(
        2).unsqueeze(1).expand(2 * n, 3))
    ragged = hvd.allgather(torch.full((r + 1,), float(r)))  # first dimensions differ
    assert ragged.tolist() == [float(q) for q in range(n) for _ in range(q + 1)]
    assert hvd.synchronize(hvd.allgather_async(torch.tensor([r]))).tolist() == list(range(n))
    w = torch.ones(2, requires_grad=True)
    (hvd.allgather(w * (r + 1)) * torch.arange(2 * n)).sum().backward()
    assert w.grad.tolist() == [(r + 1) * 2.0 * r, (r + 1) * (2.0 * r + 1)], w.grad
    assert hvd.allgather_object({"rank": r}) == [{"rank": q} for q in range(n)]
    assert hvd.allgather_object("x" * r) == ["x" * q for q in range(n)]


def check_broadcast(r, n):
    x = torch.full((3,), float(r))
    assert hvd.broadcast(x, root_rank=n - 1).tolist() == [n - 1.0] * 3 and x[0].item() == r
    y = x.clone()
    assert hvd.broadcast_(y, 1) is y and y[0].item() == 1
    h, h_ = hvd.broadcast_async(x, 0), hvd.broadcast_async_(x, 1)
    assert hvd.synchronize(h)[0].item() == 0
    hvd.synchronize(h_)
    assert x[0].item() == 1
    assert hvd.broadcast_object({"from": r}, root_rank=1) == {"from": 1}
    expect(ValueError, f"hvd.broadcast: root_rank {n} is not a rank of this job (0..{n - 1})",
           hvd.broadcast, x, n)


def check_alltoall(r, n):
    x = torch.arange(n * 2) + 100 * r  # rows 2q, 2q+1 go to rank q
    out = hvd.alltoall(x)
    assert out.tolist() == [100 * q + 2 * r + i for q in range(n) for i in range(2)], out
    splits = [q + 1 if q != r else 0 for q in range(n)]  # rank r sends q+1 rows to q
    data = torch.full((sum(splits), 2), float(r))
    got, received = hvd.alltoall(data, splits=splits)
    want = [0 if q == r else r + 1 for q in range(n)]
    assert received.tolist() == want and got.shape == (sum(want), 2), (received, got.shape)
    assert got[:, 0].tolist() == [float(q) for q in range(n) for _ in range(want[q])]
    expect(ValueError, f"hvd.alltoall: the first dimension ({n + 1}) does not divide among "
           f"{n} ranks: give splits=", hvd.alltoall, torch.zeros(n + 1))
    expect(ValueError, f"hvd.alltoall: splits [1] must be {n} counts >= 0 that add up to the "
           "first dimension (2)", hvd.alltoall, torch.zeros(2), splits=[1])


def check_reducescatter(r, n):
    x = torch.arange(2.0 * n).reshape(n, 2) * (r + 1)  # row q goes to rank q
    scale = n * (n + 1) / 2
    assert hvd.reducescatter(x, op=hvd.Sum).tolist() == [[2 * r * scale, (2 * r + 1) * scale]]
    assert hvd.reducescatter(x)[0, 0].item() == 2 * r * scale / n
    uneven = hvd.reducescatter(torch.ones(n + 1, 1), op=hvd.Sum)  # rank 0 gets two rows
    assert uneven.tolist() == [[float(n)]] * (2 if r == 0 else 1), uneven
    expect(ValueError, "hvd.reducescatter: a tensor of at least one dimension is needed",
           hvd.reducescatter, torch.tensor(1.0))


def check_errors(n):
    ones = torch.ones(2)
    expect(NotImplementedError, "hvd.allreduce: op Adasum is not supported by horovod.torch on "
           "libddl (libddl has no Adasum reduction): use hvd.Average or hvd.Sum",
           hvd.allreduce, ones, op=hvd.Adasum)
    expect(ValueError, "The op parameter supersedes average. Please provide only one of them.",
           hvd.allreduce, ones, average=True, op=hvd.Sum)
    expect(ValueError, "hvd.allreduce: unknown op 9: one of hvd.Average, hvd.Sum, hvd.Min, "
           "hvd.Max, hvd.Product", hvd.allreduce, ones, op=9)
    expect(ValueError, "Tensor is required to be contiguous.", hvd.allreduce_,
           torch.ones(2, 2).t())
    expect(ValueError, "hvd.allreduce: process_set must be a ProcessSet (hvd.global_process_set "
           "or one from hvd.add_process_set), not object", hvd.allreduce, ones,
           process_set=object())
    expect(TypeError, "hvd.allreduce: dtype complex64 cannot be reduced (it takes float32, "
           "float64, float16, bfloat16, int32, int64, uint8, int8, int16, uint16 and bool)",
           hvd.allreduce_, torch.ones(2, dtype=torch.complex64))
    expect(ValueError, "hvd.poll: handle 999999 was not created or has been cleared "
           "(synchronize() clears it)", hvd.poll, 999999)
    assert hvd.synchronize(999999) is None
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    expect(NotImplementedError, "hvd.DistributedOptimizer: op Adasum is not supported by "
           "horovod.torch on libddl (libddl has no Adasum reduction): use hvd.Average or hvd.Sum",
           hvd.DistributedOptimizer, opt, op=hvd.Adasum)
    expect(ValueError, "gradient_predivide_factor not supported with op != Average",
           hvd.DistributedOptimizer, opt, op=hvd.Sum, gradient_predivide_factor=2.0)
    del n


def check_optimizer_errors():
    model = torch.nn.Linear(2, 1)
    named = list(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expect(ValueError, "named_parameters should be a sequence of tuples (name, parameter), "
           "usually produced by model.named_parameters().", hvd.DistributedOptimizer, opt,
           named_parameters=model.parameters())
    expect(ValueError, "Parameter names in named_parameters must be unique. Found duplicates: w",
           hvd.DistributedOptimizer, opt, named_parameters=[("w", named[0][1]),
                                                            ("w", named[1][1])])
    ids = str(id(named[1][1]))
    expect(ValueError, "named_parameters was specified, but one or more model parameters were "
           f"not named. Python object ids: {ids}", hvd.DistributedOptimizer, opt,
           named_parameters=named[:1])
    dist = hvd.DistributedOptimizer(opt, named_parameters=named)
    assert isinstance(dist, torch.optim.SGD)
    model(torch.ones(1, 2)).sum().backward()
    expect(AssertionError, "optimizer.zero_grad() was called after loss.backward() but before "
           "optimizer.step() or optimizer.synchronize(). This is prohibited as it can cause a "
           "race condition.", dist.zero_grad)
    dist.step()
    dist.zero_grad()
    try:  # a second pass: more than backward_passes_per_step
        model(torch.ones(1, 2)).sum().backward()
        model(torch.ones(1, 2)).sum().backward()
    except AssertionError as e:
        assert str(e).startswith("Gradients were computed more than backward_passes_per_step "
                                 "times before call to step()."), e
    else:
        raise AssertionError("two backward passes before step() were not refused")
    dist.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.step()
    assert "optimizer.step() called without optimizer.skip_synchronize()" in str(caught[0].message)
    with dist.skip_synchronize():
        dist.step()


def main():
    check_before_init()
    hvd.init()
    hvd.init()  # a second call does nothing
    r, n = hvd.rank(), hvd.size()
    check_job(r, n)
    check_allreduce(r, n)
    check_grouped(r, n)
    check_allgather(r, n)
    check_broadcast(r, n)
    check_alltoall(r, n)
    check_reducescatter(r, n)
    check_errors(n)
    check_optimizer_errors()
    hvd.barrier()
    assert 0 <= hvd.join() < n
    hvd.shutdown()
    assert not hvd.is_initialized()
    print(f"rank {r} of {n} ok", flush=True)


main()
