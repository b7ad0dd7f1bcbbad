"""ddl's TensorFlow ops on N ranks (ddl.tensorflow, and ddl's own functions given tf.Tensors):
values for every dtype, the fused list allreduce, variables, broadcast, allgather with first
dimensions that differ, alltoall with and without splits, the same inside a tf.function, the
gradients of allreduce, allgather and broadcast, and the exact errors (an unsupported dtype,
shapes that differ between ranks). Each rank prints "rank R of N ok".

How it works: rank r contributes values made from r, so every result is known in closed form
(sums n(n+1)/2, ...). `import ddl` is checked first not to import TensorFlow. A mismatch fails
on every rank before any data moves, and the job goes on.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import ddl  # noqa: E402

assert "tensorflow" not in sys.modules, "import ddl imported tensorflow"
rank, n = ddl.rank(), ddl.size()

import tensorflow as tf  # noqa: E402

import ddl.tensorflow as dtf  # noqa: E402

TOTAL = n * (n + 1) // 2  # the sum of rank + 1 over the ranks


def check(what, got, expected):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    if got.shape != np.shape(expected) or not np.allclose(got.astype(np.float64), expected):
        sys.exit(f"rank {rank}: {what}: got {got!r}, expected {expected!r}")


def check_error(what, call, kind, text):
    """call() must raise `kind` whose message contains `text` (or equals it for TypeError)."""
    try:
        call()
    except kind as e:
        message = e.message if isinstance(e, tf.errors.OpError) else str(e)
        if (message != text) if kind is TypeError else (text not in message):
            sys.exit(f"rank {rank}: {what}: message {message!r}, expected {text!r}")
        return
    sys.exit(f"rank {rank}: {what}: no {kind.__name__}")


def values():
    for dtype in (tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64, tf.uint8,
                  tf.int8, tf.int16, tf.uint16):
        x = tf.fill([3, 2], tf.cast(rank + 1, dtype))
        check(f"allreduce sum {dtype.name}", dtf.allreduce(x), np.full([3, 2], TOTAL))
        check(f"ddl.allreduce max {dtype.name}", ddl.allreduce(x, op="max"), np.full([3, 2], n))
    check("avg", ddl.allreduce(tf.constant([float(rank)]), op="avg"), [(n - 1) / 2])
    check("bool or", dtf.allreduce(tf.constant([rank == 0, False]), op="max"), [True, False])
    check("int8 band", dtf.allreduce(tf.constant([3, 5 + rank], tf.int8), op="band"),
          [3, int(np.bitwise_and.reduce(np.arange(5, 5 + n)))])
    mixed = dtf.allreduce_n([tf.constant([rank + 1.0]), tf.constant([rank + 1], tf.int64),
                             tf.zeros([0]), tf.constant([[2.0 * rank]], tf.float64)])
    for got, expected in zip(mixed, ([TOTAL], [TOTAL], np.zeros([0]), [[n * (n - 1)]])):
        check("allreduce_n mixed", got, expected)
    variable = tf.Variable([rank + 1.0, 1.0])
    ddl.allreduce(variable)
    check("allreduce of a variable", variable, [TOTAL, n])
    check("broadcast", ddl.broadcast(tf.constant([rank, rank], tf.int32), root=n - 1),
          [n - 1, n - 1])
    gathered = ddl.allgather(tf.fill([rank + 1, 2], float(rank)))
    check("allgather", gathered, [[r, r] for r in range(n) for _ in range(r + 1)])
    check("allgather of a scalar", dtf.allgather(tf.constant(rank)), list(range(n)))
    blocks = tf.constant([[rank * 10 + j] for j in range(n)])
    check("alltoall", ddl.alltoall(blocks), [[r * 10 + rank] for r in range(n)])
    # Rank r sends j + 1 rows to rank j: rank j gets j + 1 rows from each rank.
    rows = tf.concat([tf.fill([j + 1, 1], rank) for j in range(n)], 0)
    out, received = dtf.alltoall(rows, splits=[j + 1 for j in range(n)], with_splits=True)
    check("alltoall with splits", out, [[r] for r in range(n) for _ in range(rank + 1)])
    check("alltoall received splits", received, [rank + 1] * n)


@tf.function
def in_graph(x, y):
    a = dtf.allreduce(x, op="sum")
    b = dtf.allgather(y)
    c = dtf.broadcast(x * 2.0, root=0)
    d = dtf.allreduce_n([x, tf.cast(y, tf.int32)], op="max")
    return a, b, c, d


def graph():
    for _ in range(3):
        a, b, c, d = in_graph(tf.constant([rank + 1.0]), tf.constant([rank * 1.0]))
        check("tf.function allreduce", a, [TOTAL])
        check("tf.function allgather", b, list(range(n)))
        check("tf.function broadcast", c, [2.0])
        check("tf.function allreduce_n", d[1], [n - 1])


def gradients():
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        t = tf.identity(x)  # a tensor: on a variable, allreduce and broadcast assign in place
        summed = tf.reduce_sum(dtf.allreduce(x * (rank + 1.0), op="sum") * (rank + 1.0))
        averaged = tf.reduce_sum(dtf.allreduce(t * (rank + 1.0), op="avg"))
        gathered = tf.reduce_sum(dtf.allgather(x) * (rank + 1.0))
        broadcast = tf.reduce_sum(dtf.broadcast(t, root=0) * (rank + 1.0))
    # d/dx of (rank+1) * allreduce_sum((rank+1) x): the upstream gradients summed, times rank+1.
    check("gradient of allreduce sum", tape.gradient(summed, x), [TOTAL * (rank + 1.0)] * 2)
    check("gradient of allreduce avg", tape.gradient(averaged, x), [rank + 1.0] * 2)
    check("gradient of allgather", tape.gradient(gathered, x), [TOTAL, TOTAL])
    check("gradient of broadcast", tape.gradient(broadcast, x),
          [TOTAL, TOTAL] if rank == 0 else [0.0, 0.0])
    tape = dtf.DistributedGradientTape(tf.GradientTape())
    with tape:
        loss = tf.reduce_sum(x * float(rank))
    check("DistributedGradientTape", tape.gradient(loss, x), [(n - 1) / 2] * 2)


def errors():
    check_error("unsupported dtype", lambda: dtf.allreduce(tf.constant([1], tf.complex64)),
                TypeError, "ddl.tensorflow.allreduce: dtype complex64 is not one of float32, "
                "float64, float16, bfloat16, int32, int64, uint8, int8, int16, uint16, bool")
    check_error("unknown op", lambda: dtf.allreduce(tf.constant([1.0]), op="mean"), ValueError,
                "unknown op 'mean': one of sum, avg, min, max, prod, band, bor, bxor")
    check_error("allgather shapes", lambda: dtf.allgather(tf.zeros([1, rank + 1])),
                tf.errors.FailedPreconditionError,
                "collective mismatch: rank 0 called 'allgather.eager' allgather(float32, rows "
                "of [1]) but rank 1 called 'allgather.eager' allgather(float32, rows of [2]); "
                "it ran on no rank")
    check_error("alltoall splits", lambda: dtf.alltoall(tf.zeros([3]), splits=[1] * n),
                tf.errors.InvalidArgumentError,
                f"ddl alltoall: splits add up to {n}, the first dimension is 3")
    check_error("shapes differ", lambda: dtf.allreduce(tf.zeros([2 + rank])),
                tf.errors.FailedPreconditionError,
                "collective mismatch: rank 0 called 'allreduce.eager' allreduce(float32, sum, "
                "[2]) but rank 1 called 'allreduce.eager' allreduce(float32, sum, [3])")
    # The mismatches ran on no rank: the job goes on.
    check("allreduce after the mismatches", dtf.allreduce(tf.constant([rank + 1.0])), [TOTAL])

values()
graph()
gradients()
if n > 1:
    errors()
print(f"rank {rank} of {n} ok", flush=True)
