"""The torch backend "ddl" beyond the job's collectives, as a 4-rank job: new_group subgroups
(several at once, overlapping, used in alternation with the job's calls), all_to_all_single
(equal blocks and split sizes), all_to_all, send/recv/isend/irecv (a ring, both directions at
once with large messages, inside a subgroup), batch_isend_irecv (torch's _coalescing_manager),
all_gather_into_tensor and reduce_scatter_tensor on a subgroup, and recv from any source in a
subgroup (the sender's global rank). Written as a user would: no import of ours (ddlrun's ranks get
the backend registered). Each rank prints "rank R of N ok".
"""

import sys
import warnings

import torch
import torch.distributed as dist


def fail(what):
    sys.exit(f"rank {dist.get_rank()}: {what}")


def expect(what, got, want):
    if not torch.equal(got, want):
        fail(f"{what}: got {got.tolist()}, expected {want.tolist()}")


def check_groups(rank, n):
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    three = dist.new_group([1, 2, 3])
    mine = evens if rank % 2 == 0 else odds
    members = [0, 2] if rank % 2 == 0 else [1, 3]
    for round_ in range(3):
        t = torch.full((5,), float(rank + round_))
        dist.all_reduce(t, group=mine)
        expect("subgroup all_reduce", t, torch.full((5,), float(sum(members) + 2 * round_)))
        world = torch.ones(3)
        dist.all_reduce(world)
        expect("job all_reduce between subgroup calls", world, torch.full((3,), float(n)))
        if rank in (1, 2, 3):
            b = torch.full((2,), float(rank))
            dist.broadcast(b, src=3, group=three)
            expect("broadcast in [1, 2, 3] from 3", b, torch.full((2,), 3.0))
    parts = [torch.zeros(2) for _ in members]
    dist.all_gather(parts, torch.full((2,), float(rank)), group=mine)
    for part, member in zip(parts, members):
        expect("subgroup all_gather", part, torch.full((2,), float(member)))
    out = torch.zeros(2 * len(members))
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)), group=mine)
    expect("subgroup all_gather_into_tensor", out,
           torch.tensor([float(m) for m in members for _ in range(2)]))
    out = torch.zeros(3)
    dist.reduce_scatter_tensor(out, torch.arange(6, dtype=torch.float32) * (rank + 1), group=mine)
    me = members.index(rank)
    expect("subgroup reduce_scatter_tensor", out,
           torch.arange(3 * me, 3 * me + 3, dtype=torch.float32) * sum(m + 1 for m in members))
    dist.barrier(group=mine)


def check_alltoall(rank, n):
    send = torch.arange(n * 2, dtype=torch.float32) + 100 * rank
    recv = torch.zeros(n * 2)
    dist.all_to_all_single(recv, send)
    expect("all_to_all_single", recv,
           torch.tensor([100.0 * r + 2 * rank + k for r in range(n) for k in range(2)]))
    # Rank r sends r + 1 rows of 3 to every rank, so it receives q + 1 rows from rank q.
    send = torch.full((n * (rank + 1), 3), float(rank))
    recv = torch.zeros(sum(q + 1 for q in range(n)), 3)
    dist.all_to_all_single(recv, send, output_split_sizes=[q + 1 for q in range(n)],
                           input_split_sizes=[rank + 1] * n)
    expect("all_to_all_single with splits", recv,
           torch.cat([torch.full((q + 1, 3), float(q)) for q in range(n)]))
    inputs = [torch.full((rank + q + 1,), float(10 * rank + q), dtype=torch.int64)
              for q in range(n)]
    outputs = [torch.zeros(q + rank + 1, dtype=torch.int64) for q in range(n)]
    dist.all_to_all(outputs, inputs)
    for q, got in enumerate(outputs):
        expect(f"all_to_all from {q}", got,
               torch.full((q + rank + 1,), 10 * q + rank, dtype=torch.int64))


def check_messages(rank, n):
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(4)
    works = [dist.isend(torch.full((4,), float(rank)), right), dist.irecv(got, left)]
    for w in works:
        w.wait()
    expect("ring isend/irecv", got, torch.full((4,), float(left)))
    # Both directions at once, larger than any link buffer: neither send may wait for the other.
    big = torch.full((1 << 20,), float(rank))
    from_right, from_left = torch.zeros(1 << 20), torch.zeros(1 << 20)
    works = [dist.isend(big, right, tag=1), dist.isend(big, left, tag=2),
             dist.irecv(from_right, right, tag=2), dist.irecv(from_left, left, tag=1)]
    for w in works:
        w.wait()
    expect("large message from the right", from_right[:3], torch.full((3,), float(right)))
    expect("large message from the left", from_left[-3:], torch.full((3,), float(left)))
    if rank in (0, 2):  # blocking send/recv inside the group of the even ranks
        group = dist.new_group([0, 2])
        t = torch.tensor([7.0, rank])
        if rank == 0:
            dist.send(t, 2, group=group)
        else:
            dist.recv(t, 0, group=group)
            expect("send/recv in a subgroup", t, torch.tensor([7.0, 0.0]))
    else:
        dist.new_group([0, 2])  # every rank calls new_group
    ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank)), right),
           dist.P2POp(dist.irecv, got[:2], left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect("batch_isend_irecv", got[:2], torch.full((2,), float(left)))


def check_any_source(rank):
    """The odd ranks' group: rank 3 sends rank 1 two messages, rank 1 receives them from any
    source, first with irecv (the work's source rank is rank 3's group rank), then recv (its
    result is rank 3's global rank)."""
    odds = dist.new_group([1, 3])
    if rank == 3:
        for v in (1.0, 2.0):
            dist.send(torch.tensor([v]), 1, group=odds)
    elif rank == 1:
        t = torch.zeros(1)
        work = dist.irecv(t, group=odds)
        work.wait()
        if work._source_rank() != 1:
            fail(f"irecv from any source: source rank {work._source_rank()}, want group rank 1")
        expect("irecv from any source", t, torch.tensor([1.0]))
        if dist.recv(t, group=odds) != 3:
            fail("recv from any source: not from rank 3")
        expect("recv from any source", t, torch.tensor([2.0]))


def main():
    torch.set_num_threads(1)
    dist.init_process_group('ddl', init_method='env://')
    rank, n = dist.get_rank(), dist.get_world_size()
    check_groups(rank, n)
    check_alltoall(rank, n)
    check_messages(rank, n)
    check_any_source(rank)
    dist.barrier()
    print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()


main()
