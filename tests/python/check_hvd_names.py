"""horovod.torch's asynchronous calls matched by name (ddl._negotiate), as a 2-rank job: rank 0
calls allreduce_async on a then b, rank 1 on b then a (same shapes), and each gets its own
tensor's sum; calls named differently on the two ranks raise NameMismatch on both, with its
exact text, rather than pairing tensors that do not belong together; the job goes on after.
"""

import torch

import horovod.torch as hvd
from ddl._negotiate import NameMismatch


def check_reordered(r):
    a, b = torch.full((4,), 1.0 + r), torch.full((4,), 10.0 * (r + 1))
    order = [("a", a), ("b", b)] if r == 0 else [("b", b), ("a", a)]
    handles = {name: hvd.allreduce_async(t, name=name, op=hvd.Sum) for name, t in order}
    assert hvd.synchronize(handles["a"]).tolist() == [3.0] * 4
    assert hvd.synchronize(handles["b"]).tolist() == [30.0] * 4
    # unnamed calls still pair by order, beside named ones
    h = [hvd.allreduce_async(torch.tensor([float(r)]), op=hvd.Sum) for _ in range(3)]
    assert [hvd.synchronize(x).item() for x in h] == [1.0] * 3


def check_mismatch(r):
    name = "grad.w" if r == 0 else "grad.v"
    handle = hvd.allreduce_async(torch.ones(2), name=name)
    try:
        hvd.synchronize(handle)
    except NameMismatch as e:
        want = ("every rank waits for a collective that another rank did not call, so none can "
                f"run: this rank called 'allreduce.{name}' (not called by rank {1 - r}); give each "
                "collective the same name= on every rank (or no name, and the same order)")
        assert str(e) == want, str(e)
    else:
        raise AssertionError("differently named calls did not raise NameMismatch")


def main():
    hvd.init()
    r = hvd.rank()
    assert hvd.size() == 2
    check_reordered(r)
    check_mismatch(r)
    check_reordered(r)  # the job goes on after a refusal
    print(f"rank {r} of 2 ok", flush=True)


if __name__ == "__main__":
    main()
