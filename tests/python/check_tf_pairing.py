"""TensorFlow collectives are paired across ranks by name, never by the order an executor starts
them, and a call the ranks make differently fails on every rank and leaves the job usable.
Each rank prints "rank R of N ok".

How it works: a tf.compat.v1 graph holds 32 independent allreduces of one shape, op i fed
i*1000+rank, run by a Session many times (the executor starts them in any order, differently
on each rank); then a graph whose ops each rank builds in its own order (rank r reversed when
r is odd) under the same names. Every result is known in closed form. Then the errors, in
graph and eager mode: a shape that differs on one rank, a dtype that differs, a root that
differs: every rank gets tf.errors.FailedPreconditionError naming both calls, and the next
collective still gives the right sum. A name still pending is refused with
InvalidArgumentError (two ops of one name in one step).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

hvd.init()
rank, n = hvd.rank(), hvd.size()
RANKS = n * (n - 1) // 2  # the sum of the ranks
OPS = 32


def fail(what):
    sys.exit(f"rank {rank}: {what}")


def independent_ops():
    """32 allreduces with no order between them, run 20 times."""
    graph = tf.Graph()
    with graph.as_default():
        outs = [hvd.allreduce(tf.fill([64], tf.constant(i * 1000.0 + rank)), op=hvd.Sum)
                for i in range(OPS)]
        with tf.compat.v1.Session(graph=graph) as session:
            for run in range(20):
                for i, got in enumerate(session.run(outs)):
                    expected = i * 1000.0 * n + RANKS
                    if not np.all(got == expected):
                        fail(f"graph run {run}: op {i}: got {got[:3]}..., expected {expected}")


def built_in_rank_order():
    """The same named ops, built in another order on odd ranks."""
    graph = tf.Graph()
    order = list(range(OPS))
    if rank % 2:
        order.reverse()
    with graph.as_default():
        outs = {i: hvd.allreduce(tf.fill([8], tf.constant(i + 10.0 * rank)), op=hvd.Sum,
                                 name=f"grad_{i}") for i in order}
        with tf.compat.v1.Session(graph=graph) as session:
            got = session.run(outs)
    for i in range(OPS):
        if not np.all(got[i] == i * n + 10.0 * RANKS):
            fail(f"op grad_{i} built in rank order: got {got[i][:3]}")


def expect_mismatch(what, call, texts):
    """call() fails with FailedPreconditionError naming `texts`; then an allreduce works."""
    try:
        call()
    except tf.errors.FailedPreconditionError as e:
        for text in texts:
            if text not in e.message:
                fail(f"{what}: message {e.message!r} does not name {text!r}")
    else:
        fail(f"{what}: no FailedPreconditionError")
    after = hvd.allreduce(tf.constant([rank + 1.0]), op=hvd.Sum)
    if float(after[0]) != n * (n + 1) / 2:
        fail(f"after {what}: allreduce gave {after}")


def errors_eager():
    expect_mismatch("shape", lambda: hvd.allreduce(tf.ones([17 + (rank == 1)])),
                    ["collective mismatch: rank 0 called", "[17]", "rank 1 called", "[18]"])
    expect_mismatch("dtype", lambda: hvd.allreduce(tf.ones([4], tf.int32 if rank else
                                                           tf.float32)),
                    ["float", "int32"])
    expect_mismatch("root", lambda: hvd.broadcast(tf.ones([4]), root_rank=rank % 2),
                    ["root 0", "root 1"])


def errors_graph():
    graph = tf.Graph()
    with graph.as_default():
        bad = hvd.allreduce(tf.ones([5 + rank]), name="bad")
        good = hvd.allreduce(tf.constant([rank + 1.0]), op=hvd.Sum, name="good")
        with tf.compat.v1.Session(graph=graph) as session:
            try:
                session.run(bad)
            except tf.errors.FailedPreconditionError as e:
                if "'bad'" not in e.message:
                    fail(f"graph mismatch: {e.message!r} does not name 'bad'")
            else:
                fail("graph mismatch: no FailedPreconditionError")
            if float(session.run(good)[0]) != n * (n + 1) / 2:
                fail("graph: allreduce after a mismatch")


independent_ops()
built_in_rank_order()
if n > 1:
    errors_eager()
    errors_graph()
print(f"rank {rank} of {n} ok", flush=True)
