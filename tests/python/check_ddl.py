"""Every ddl collective on every dtype, numpy and torch, in place and out of place.

How it works: run as a real job (tests/python/run_job.sh starts it under ddlrun). Rank r fills
its arrays from r and the element index so every result is an exact small integer in every
dtype (fp16/bf16 included); each rank checks its own results and prints "rank R of N ok". Torch
tensors are checked too when torch is importable. The bitwise ops on every integer dtype, bool's
logical reductions, and the refused pairs with their texts (check_bits_and_bools).
"""

import functools

import sys
import threading
import time

import numpy as np

import ddl

try:
    import torch
except ImportError:
    torch = None

R, N = ddl.rank(), ddl.size()
COUNTS = (1, 7, 1000, 100003)  # a single element, odd sizes, large enough for the ring paths
NUMPY_TYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8,
               np.int16, np.uint16]
TORCH_TYPES = [] if torch is None else [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
    torch.uint8, torch.int8, torch.int16,
] + ([torch.uint16] if hasattr(torch, "uint16") else [])  # torch 2.3 on
INTEGER_TYPES = [t for t in NUMPY_TYPES + TORCH_TYPES if "int" in str(t)]


def arange_mod(n, k):
    return np.arange(n, dtype=np.int64) % k


def make(values, dtype):
    """values (int64 numpy) as an array or tensor of dtype."""
    if isinstance(dtype, type):
        return values.astype(dtype)
    return torch.from_numpy(values.copy()).to(dtype)


def as_int64(x):
    if isinstance(x, np.ndarray):
        return x.astype(np.int64)
    return x.to(torch.float64).numpy().astype(np.int64)


def expect(what, got, want):
    got = as_int64(got)
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))[:5] if got.shape == want.shape else []
        sys.exit(f"rank {R}: {what}: got {got.reshape(-1)[:8]}... want {want.reshape(-1)[:8]}... "
                 f"(shapes {got.shape} {want.shape}, first bad {list(bad)})")


def check_allreduce(dtype):
    for n in COUNTS:
        k = arange_mod(n, 5)
        # x_r = 2r + k + 1: sum, avg, min and max are exact integers.
        wants = {
            "sum": N * (N - 1) + N * (k + 1),
            "avg": (N - 1) + (k + 1),
            "min": k + 1,
            "max": 2 * (N - 1) + k + 1,
        }
        for op, want in wants.items():
            x = make(2 * R + k + 1, dtype)
            same = ddl.allreduce(x, op=op)
            assert same is x
            expect(f"allreduce {op} {dtype} n={n} in place", x, want)
            x = make(2 * R + k + 1, dtype)
            out = make(np.zeros(n, np.int64), dtype)
            assert ddl.allreduce(x, op=op, out=out) is out
            expect(f"allreduce {op} {dtype} n={n} out=", out, want)
            expect(f"allreduce {op} {dtype} n={n} input unchanged", x, 2 * R + k + 1)
        # y_r = 1 or 2: the product is a small power of two.
        i = np.arange(n)
        y = make(1 + (i + R) % 2, dtype)
        ones = sum(((i + r) % 2) for r in range(N))
        ddl.allreduce(y, op="prod")
        expect(f"allreduce prod {dtype} n={n}", y, 2 ** ones)


def check_allreduce_n(dtypes):
    sizes = [3, 1000, 1, 65537]
    items, wants = [], []
    for j, n in enumerate(sizes):
        dtype = dtypes[j % len(dtypes)]
        k = arange_mod(n, 5)
        items.append(make(2 * R + k + 1 + j, dtype))
        wants.append(N * (N - 1) + N * (k + 1 + j))
    assert ddl.allreduce_n(items) is items
    for j, (x, want) in enumerate(zip(items, wants)):
        expect(f"allreduce_n item {j} {dtypes}", x, want)


def check_broadcast(dtype):
    for root in range(N):
        for n in COUNTS:
            x = make(np.full(n, R) + arange_mod(n, 3), dtype)
            assert ddl.broadcast(x, root) is x
            expect(f"broadcast {dtype} root={root} n={n}", x, root + arange_mod(n, 3))


def check_allgather(dtype):
    for n in (1, 7, 20000):
        x = make(np.full(n, R) + arange_mod(n, 4), dtype)
        out = ddl.allgather(x)
        assert type(out) is type(x) and out.dtype == x.dtype
        want = np.concatenate([np.full(n, r) + arange_mod(n, 4) for r in range(N)])
        expect(f"allgather {dtype} n={n}", out, want)
    x = make(np.full((2, 3), R), dtype)
    out = ddl.allgather(x)
    expect(f"allgather 2-d {dtype}", out, np.repeat(np.arange(N), 6).reshape(2 * N, 3))


def check_reduce_scatter(dtype):
    for chunk in (1, 5, 30001):
        n = chunk * N
        k = arange_mod(n, 5)
        x = make(2 * R + k + 1, dtype)
        for op, want in (("sum", N * (N - 1) + N * (k + 1)), ("max", 2 * (N - 1) + k + 1)):
            out = ddl.reduce_scatter(x, op=op)
            expect(f"reduce_scatter {op} {dtype} chunk={chunk}", out,
                   want[R * chunk:(R + 1) * chunk])
    x = make(np.ones((N * 2, 3), np.int64), dtype)
    expect(f"reduce_scatter 2-d {dtype}", ddl.reduce_scatter(x), np.full((2, 3), N))


def check_bits_and_bools():
    """band, bor, bxor on every integer dtype; bool's or, and, xor; the refused pairs."""
    n = 1001
    i = np.arange(n, dtype=np.int64)
    mine = [(i * 7 + r * 13) % 61 for r in range(N)]  # every integer dtype holds 0..60
    for op, fold in (("band", np.bitwise_and), ("bor", np.bitwise_or), ("bxor", np.bitwise_xor)):
        want = functools.reduce(fold, mine)
        for dtype in INTEGER_TYPES:
            x = make(mine[R], dtype)
            expect(f"allreduce {op} {dtype}", ddl.allreduce(x, op=op), want)
    flags = [(i + r) % 3 != 0 for r in range(N)]
    any_, all_ = np.logical_or.reduce(flags), np.logical_and.reduce(flags)
    odd = np.logical_xor.reduce(flags)
    for dtype in [np.bool_] + ([] if torch is None else [torch.bool]):
        for op, want in (("sum", any_), ("max", any_), ("bor", any_), ("prod", all_),
                         ("min", all_), ("band", all_), ("bxor", odd)):
            x = make(flags[R], dtype)
            expect(f"allreduce {op} {dtype}", ddl.allreduce(x, op=op), want.astype(np.int64))
        x = make(flags[R], dtype)
        expect(f"broadcast {dtype}", ddl.broadcast(x, N - 1), flags[N - 1].astype(np.int64))
        expect(f"allgather {dtype}", ddl.allgather(make(flags[R], dtype)),
               np.concatenate(flags).astype(np.int64))
    refused = (
        (np.zeros(3, np.bool_), "avg",
         "allreduce: reduce op avg does not take bool (on bool, sum and max are a logical or, "
         "prod and min a logical and)"),
        (np.zeros(3, np.float32), "band",
         "allreduce: reduce op band is bitwise: it takes integer and bool types, not float32"),
    )
    if torch is not None:
        refused += ((torch.zeros(3, dtype=torch.float16), "bxor",
                     "allreduce: reduce op bxor is bitwise: it takes integer and bool types, not "
                     "float16"),)
    for x, op, text in refused:
        try:
            ddl.allreduce(x, op=op)
        except ddl.Error as e:
            if (e.status, str(e)) != (1, text):
                sys.exit(f"rank {R}: allreduce {op} {x.dtype}: {e.status} {str(e)!r}, want {text!r}")
        else:
            sys.exit(f"rank {R}: allreduce {op} {x.dtype} was not refused")


def check_errors():
    def raises(kind, call):
        try:
            call()
        except kind:
            return
        sys.exit(f"rank {R}: {call} did not raise {kind.__name__}")

    a = np.zeros((4, 4), np.float32)
    raises(ValueError, lambda: ddl.allreduce(a[:, 1]))  # not contiguous
    raises(TypeError, lambda: ddl.allreduce(np.zeros(3, np.complex64)))
    raises(TypeError, lambda: ddl.allreduce([1.0, 2.0]))
    raises(ValueError, lambda: ddl.allreduce(a, op="mean"))
    raises(ValueError, lambda: ddl.allreduce(a, out=np.zeros(3, np.float32)))
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    raises(ValueError, lambda: ddl.allreduce(ro))
    raises(ValueError, lambda: ddl.reduce_scatter(np.zeros(N * 2 + 1, np.float32)))
    if torch is not None:
        raises(ValueError, lambda: ddl.allreduce(torch.zeros(4, 4).t()))
        raises(TypeError, lambda: ddl.allreduce(torch.zeros(3, dtype=torch.complex64)))
    # A bad root is the runtime's to refuse, on every rank alike: ddl.Error with its message.
    try:
        ddl.broadcast(np.zeros(3, np.float32), root=N)
    except ddl.Error as e:
        assert e.status == 1 and str(e), (e.status, str(e))
    else:
        sys.exit(f"rank {R}: broadcast with root {N} did not raise ddl.Error")


def check_shared():
    """ddl.shared_zeros (ddl_alloc memory): every rank sharing (libddl's single pass), then only
    the even ranks (the mixed path); numpy and torch; exact sums either way."""
    for n in (5, 100_000):
        a = ddl.shared_zeros((n,), np.int64)
        if a.dtype != np.int64 or a.shape != (n,) or a.any():
            sys.exit(f"rank {R}: shared_zeros gave {a.dtype} {a.shape}, nonzero {a.any()}")
        a[:] = arange_mod(n, 5) + R
        ddl.allreduce(a)
        expect(f"shared allreduce of {n}", a, N * arange_mod(n, 5) + N * (N - 1) // 2)
        b = ddl.shared_zeros(n, "float64") if R % 2 == 0 else np.zeros(n)
        b[:] = arange_mod(n, 3) + R
        ddl.allreduce(b, op="max")
        expect(f"mixed allreduce of {n}", b, arange_mod(n, 3) + N - 1)
    if ddl.shared_zeros((0, 3), np.float32).shape != (0, 3):
        sys.exit(f"rank {R}: shared_zeros((0, 3)) has the wrong shape")
    try:
        ddl.shared_zeros((10**15,), np.float64)
        sys.exit(f"rank {R}: shared_zeros of 8 PB did not fail")
    except ddl.Error as e:
        if not str(e).startswith("ddl_alloc: 8000000000000000 bytes (7629394531.2 MiB) is more "
                                 "than this host's memory, "):
            sys.exit(f"rank {R}: shared_zeros of 8 PB: {e}")
    if torch is not None:
        t = ddl.shared_zeros((3, 20_000), torch.bfloat16)
        if t.dtype != torch.bfloat16 or tuple(t.shape) != (3, 20_000):
            sys.exit(f"rank {R}: shared_zeros gave {t.dtype} {tuple(t.shape)}")
        t += R
        ddl.allreduce(t)
        expect("shared torch allreduce", t, np.full((3, 20_000), N * (N - 1) // 2))


def check_gil_released():
    """Rank 0 waits in a barrier on another thread while the others sleep: its main thread
    must keep running Python meanwhile (the GIL is released while ddl communicates)."""
    if R != 0:
        time.sleep(0.5)
        ddl.barrier()
        return
    waiter = threading.Thread(target=ddl.barrier)
    waiter.start()
    spins = 0
    while waiter.is_alive():
        spins += 1
    waiter.join()
    if spins < 1000:
        sys.exit(f"rank 0: only {spins} loops of Python ran during a barrier: the GIL was held")


def main():
    assert 0 <= R < N and 0 <= ddl.local_rank() < ddl.local_size()
    for dtype in NUMPY_TYPES + TORCH_TYPES:
        check_allreduce(dtype)
        check_broadcast(dtype)
        check_allgather(dtype)
        check_reduce_scatter(dtype)
    check_allreduce_n([np.float32])
    check_allreduce_n([np.float64, np.int32, np.uint8])  # mixed dtypes in one call
    if torch is not None:
        check_allreduce_n([torch.bfloat16])
        check_allreduce_n([torch.float32, np.float32, torch.int64])  # numpy and torch mixed
    check_bits_and_bools()
    check_errors()
    check_shared()
    if N > 1:
        check_gil_released()
    ddl.barrier()
    print(f"rank {R} of {N} ok", flush=True)
    ddl.finalize()


main()
