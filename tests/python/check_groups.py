"""ddl's groups, alltoall and messages from Python, on numpy arrays and torch tensors.

How it works: run as a real job of 5 ranks (tests/python/run_job.sh). Every rank makes the group
of the even ranks and the group of ranks 4, 1, 3 (listed out of order), as torch's new_group is
called; members use theirs in alternation with the job's calls. Each rank checks its own results
and prints "rank R of N ok".
"""

import numpy as np

import ddl

try:
    import torch
except ImportError:
    torch = None

R, N = ddl.rank(), ddl.size()


def check(cond, what):
    if not cond:
        raise SystemExit(f"rank {R}: {what}")


def check_group(g, members):
    check(g.size() == len(members) and members[g.rank()] == R, "group shape")
    x = np.full(5, R, dtype=np.int64)
    g.allreduce(x, op="max")
    check(x[4] == max(members), f"group max {x}")
    y = g.allgather(np.array([R], dtype=np.int32))
    check(list(y) == members, f"group allgather {y}")
    b = np.array([R], dtype=np.float64)
    g.broadcast(b, root=len(members) - 1)
    check(b[0] == members[-1], "group broadcast")
    blocks = np.arange(len(members) * 2, dtype=np.float32) + 100 * R
    got = g.alltoall(blocks)
    want = [100 * m + 2 * g.rank() + k for m in members for k in range(2)]
    check(list(got) == want, f"group alltoall {got} != {want}")
    g.barrier()


def check_messages():
    nxt, prv = (R + 1) % N, (R - 1) % N
    ddl.send(np.array([R, 2 * R], dtype=np.int64), nxt, tag=3)
    got = ddl.recv(np.zeros(2, dtype=np.int64), prv, tag=3)
    check(list(got) == [prv, 2 * prv], f"ring message {got}")
    if torch is not None:
        t = torch.full((3,), float(R), dtype=torch.bfloat16)
        ddl.send(t, prv, tag=4)
        ddl.recv(t, nxt, tag=4)
        check(t[2].item() == float(nxt), "torch message")
    if R == 1:
        ddl.send(np.zeros(4, dtype=np.float32), 0, tag=9)
    if R == 0:
        try:
            ddl.recv(np.zeros(3, dtype=np.float32), 1, tag=9)
            check(False, "a short recv accepted")
        except ddl.MismatchError as e:
            check("rank 1 sent 4 elements of float32, this rank expects 3" in str(e), str(e))


def check_alltoall():
    got = ddl.alltoall(np.arange(N, dtype=np.int32) + 10 * R)
    check(list(got) == [10 * j + R for j in range(N)], f"alltoall {got}")
    sends = [j + 1 for j in range(N)]  # rank R sends j+1 elements to rank j
    got = ddl.alltoallv(np.full(sum(sends), R, dtype=np.int64), sends, [R + 1] * N)
    check(list(got) == [j for j in range(N) for _ in range(R + 1)], f"alltoallv {got}")


def main():
    check(N == 5, "run me on 5 ranks")
    evens = ddl.new_group([0, 2, 4])
    odd = ddl.new_group([4, 1, 3])
    check((evens is not None) == (R % 2 == 0), "evens membership")
    check((odd is not None) == (R in (4, 1, 3)), "odd membership")
    for _ in range(3):
        if evens:
            check_group(evens, [0, 2, 4])
        ddl.barrier()
        if odd:
            check_group(odd, [4, 1, 3])
    check_messages()
    check_alltoall()
    for g in (evens, odd):
        if g:
            g.destroy()
    try:
        ddl.allreduce(np.zeros(1), group=evens or odd)  # every rank is in one of them
        check(False, "a destroyed group accepted")
    except ValueError as e:
        check("destroyed" in str(e), str(e))
    print(f"rank {R} of {N} ok", flush=True)


main()
