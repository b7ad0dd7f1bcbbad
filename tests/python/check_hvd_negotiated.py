"""horovod.torch's calls negotiated by name and checked before they run, as a 2-rank job (3
works too): a mismatched synchronous call (shape, dtype, root) raises ddl.MismatchError on
every rank and the next calls still work; a rank gone ahead to a barrier waits there for the
others whose calls failed; a duplicate name in flight is refused; join() stands
in with zeros for a rank with less data and refuses an allgather; process sets; the forms and
gradients of reducescatter, grouped_allgather, alltoall and grouped_allreduce; sparse
allreduce and DistributedOptimizer on nn.Embedding(sparse=True); int8 sums and scaled integers;
broadcast_optimizer_state's zero gradients; the timeline (readable while on); init -> shutdown -> init;
the helpers Horovod's suites import (env). Every value is checked against what one process computes.
"""

import json
import os
import tempfile

import torch

import ddl
import horovod.torch as hvd
from ddl._negotiate import NameMismatch
from horovod.common.util import env, is_version_greater_equal_than
from horovod.runner.common.util.env import get_env_rank_and_size
from horovod.runner.util.threads import in_thread


def expect_raise(kinds, fn, text=None):
    try:
        fn()
    except kinds as e:
        assert text is None or text in str(e), str(e)
        return e
    raise AssertionError(f"{fn} did not raise {kinds}")


def check_mismatch_recovers(r, n):
    expect_raise(ddl.MismatchError, lambda: hvd.allreduce(torch.ones(3 + r)),
                 "collective mismatch")
    expect_raise(ddl.MismatchError, lambda: hvd.allreduce(
        torch.ones(4, dtype=torch.int32 if r else torch.float32)))
    expect_raise(ddl.MismatchError, lambda: hvd.broadcast(torch.ones(2), r))
    got = hvd.allreduce(torch.full((5,), float(r)), op=hvd.Sum)
    assert got.tolist() == [float(sum(range(n)))] * 5, got
    h = hvd.allreduce_async(torch.ones(2), name="twice")
    expect_raise(ValueError, lambda: hvd.allreduce_async(torch.ones(2), name="twice"),
                 "not synchronized yet")
    assert hvd.synchronize(h).tolist() == [1.0, 1.0]


def check_diverged(r, n):
    """Rank 0 goes on to a barrier while the others still make a call: theirs fails with
    NameMismatch, rank 0's barrier waits for them, and the job goes on."""
    if r != 0:
        expect_raise(NameMismatch, lambda: hvd.allreduce(torch.ones(1), name="late"),
                     "'allreduce.late'")
    hvd.barrier()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n


def check_join(r, n):
    """Rank 0 runs out of data first: the others' allreduces, and their DistributedOptimizer's
    gradients, average its zeros in."""
    model = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.ones_(model.weight)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0))
    if r != 0:
        got = hvd.allreduce(torch.full((3,), 6.0), name="uneven", op=hvd.Average)
        assert got.tolist() == [6.0 * (n - 1) / n] * 3, got
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        assert torch.allclose(model.weight, torch.full((1, 2), 1.0 - (n - 1) / n)), model.weight
        expect_raise(RuntimeError, lambda: hvd.allgather(torch.ones(1)), "joined")
    last = hvd.join()
    assert last != 0 and hvd.allgather_object(last) == [last] * n
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n  # counters agree again


def check_process_sets(r, n):
    evens = hvd.add_process_set([k for k in range(n) if k % 2 == 0])
    odds = hvd.add_process_set([k for k in range(n) if k % 2 == 1])
    mine = evens if r % 2 == 0 else odds
    total = sum(k for k in mine.ranks)
    assert hvd.allreduce(torch.tensor([float(r)]), op=hvd.Sum, process_set=mine).item() == total
    root = mine.ranks[-1]
    assert hvd.broadcast(torch.tensor([r]), root, process_set=mine).item() == root
    hvd.barrier(process_set=mine)
    assert hvd.remove_process_set(odds) and hvd.remove_process_set(evens)
    assert not hvd.remove_process_set(evens)


def check_forms(r, n):
    x = torch.arange(2.0 * n + 1).reshape(-1, 1).requires_grad_()
    part = hvd.reducescatter(x, op=hvd.Sum)  # 2n+1 rows: rank 0 gets one more
    rows = 3 if r == 0 else 2
    first = 0 if r == 0 else 3 + 2 * (r - 1)
    assert part.shape == (rows, 1) and part[0, 0].item() == n * first, part
    part.sum().backward()
    assert x.grad.eq(n).all(), x.grad
    h = hvd.reducescatter_async(torch.ones(2 * n), op=hvd.Average)
    assert hvd.synchronize(h).tolist() == [1.0, 1.0]
    outs = hvd.grouped_allgather([torch.full((r + 1, 2), r, dtype=torch.int8),
                                  torch.tensor([r > 0])])
    assert outs[0].shape == (n * (n + 1) // 2, 2) and outs[1].tolist() == [k > 0 for k in range(n)]
    t = torch.arange(float(n)).requires_grad_()
    out, counts = hvd.alltoall(t, torch.ones(n, dtype=torch.int32))
    assert out.tolist() == [float(r)] * n and counts.tolist() == [1] * n
    out.sum().backward()
    assert t.grad.tolist() == [1.0] * n
    a, b = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    sa, sb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    (sa.sum() + sb.sum()).backward()
    assert a.grad.tolist() == [float(n)] * 2 and b.grad.tolist() == [float(n)] * 3


def check_dtypes(r, n):
    small = hvd.allreduce(torch.tensor([100, -100], dtype=torch.int8), op=hvd.Sum)
    want = torch.tensor([100 * n, -100 * n], dtype=torch.int32).to(torch.int8)
    assert small.dtype == torch.int8 and small.tolist() == want.tolist(), small
    scaled = hvd.allreduce(torch.tensor([7, -7]), op=hvd.Sum, prescale_factor=0.5,
                           postscale_factor=1.5)
    assert scaled.tolist() == [int(3 * n * 1.5), int(-3 * n * 1.5)], scaled


def check_sparse(r, n):
    t = torch.zeros(6, 2)
    t[r] = 1.0
    t[5] = 2.0
    got = hvd.sparse_allreduce_async(t.to_sparse(), "sparse", hvd.Sum)()
    want = torch.zeros(6, 2)
    want[:n] = 1.0
    want[5] = 2.0 * n
    assert torch.equal(got.to_dense(), want), got
    for dense in (False, True):
        emb = torch.nn.Embedding(6, 2, sparse=True)
        torch.nn.init.zeros_(emb.weight)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       sparse_as_dense=dense)
        emb(torch.tensor([r, 5])).sum().backward()
        opt.step()
        assert emb.weight[5].tolist() == [-1.0, -1.0]
        assert abs(emb.weight[0, 0].item() + 1.0 / n) < 1e-6, emb.weight


def check_optimizer_state(r, n):
    model = torch.nn.Linear(2, 1)
    frozen = torch.nn.Parameter(torch.ones(1), requires_grad=False)
    opt = torch.optim.SGD([{"params": model.parameters()}, {"params": [frozen]}], lr=0.1,
                          momentum=0.9)
    opt = hvd.DistributedOptimizer(opt)
    assert len(set(opt._parameter_names.values())) == 3
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    before = model.weight.detach().clone()
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert torch.equal(model.weight, before) and model.weight.grad.eq(0).all()
    assert frozen.grad is None


def check_env():
    """horovod.common.util.env sets variables for a block and gives back what was there."""
    os.environ["HVD_CHECK_A"] = "kept"
    os.environ.pop("HVD_CHECK_B", None)
    try:
        with env(HVD_CHECK_A="block", HVD_CHECK_B=2):
            assert os.environ["HVD_CHECK_A"] == "block" and os.environ["HVD_CHECK_B"] == "2"
            raise KeyError("leaves the block")
    except KeyError:
        pass
    assert os.environ["HVD_CHECK_A"] == "kept" and "HVD_CHECK_B" not in os.environ


def check_env_rank(r, n):
    """get_env_rank_and_size: Horovod's variables first, else the ones libddl reads (DDL_RANK
    under ddlrun); a launcher's rank without its size is refused."""
    saved = {v: os.environ.pop(v, None) for v in ("HOROVOD_RANK", "HOROVOD_SIZE")}
    try:
        assert get_env_rank_and_size() == (r, n)
        with env(HOROVOD_RANK="5", HOROVOD_SIZE="9"):
            assert get_env_rank_and_size() == (5, 9)
        with env(HOROVOD_RANK="5"):
            expect_raise(RuntimeError, get_env_rank_and_size, "HOROVOD_SIZE is None")
    finally:
        os.environ.update({v: val for v, val in saved.items() if val is not None})


def check_timeline(r):
    path = os.path.join(tempfile.mkdtemp(), "timeline.json") if r == 0 else "unused"
    hvd.start_timeline(path, mark_cycles=True)
    hvd.allreduce(torch.ones(1), name="traced")
    wanted = {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "CYCLE_START", "allreduce.traced"}
    if r == 0:  # written as the events come, as Horovod's: readable while the timeline is on
        with open(path, encoding="utf-8") as f:
            running = f.read()
        assert all(w in running for w in wanted), running
    hvd.stop_timeline()
    if r == 0:  # then closed: one JSON array
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
        names = {e["name"] for e in events} | {e.get("args", {}).get("name") for e in events}
        assert wanted <= names


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert is_version_greater_equal_than("2.13.0+cpu", "2.13") and in_thread(lambda: 0).name
    check_env()
    check_env_rank(r, n)
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    for check in (check_mismatch_recovers, check_diverged, check_join, check_process_sets, check_forms,
                  check_dtypes, check_sparse, check_optimizer_state):
        check(r, n)
    check_timeline(r)
    hvd.shutdown()
    expect_raise(ValueError, hvd.rank, "not been initialized")
    hvd.init()
    assert hvd.rank() == r and hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n
    print(f"rank {r} of {n} ok", flush=True)


if __name__ == "__main__":
    main()
