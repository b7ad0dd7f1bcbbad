"""horovod.tensorflow's calls beyond the basic four, on N ranks: join with uneven data,
reducescatter (even, uneven, scaled, its gradient), grouped_allgather, broadcast_ in place, the
*_op tensors, broadcast_global_variables in a Session graph, SyncBatchNormalization against one
batch norm over every rank's rows, Keras 2 (tf-keras) DistributedOptimizer with
backward_passes_per_step=2, and the op errors horovod.torch gives too. Each rank prints "rank R
of N ok".

How it works: rank r contributes values made from r, so every result is known in closed form.
The script sets TF_USE_LEGACY_KERAS=1 itself (tf.keras is tf-keras here).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402
import horovod.tensorflow.keras as hvd_keras  # noqa: E402

hvd.init()
rank, n = hvd.rank(), hvd.size()


def check(what, got, expected, tol=1e-6):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got, dtype=np.float64)
    if got.shape != np.shape(expected) or not np.allclose(got, expected, atol=tol):
        sys.exit(f"rank {rank}: {what}: got {got!r}, expected {expected!r}")


def join():
    """Every rank but the last joins first; the last allreduces twice alone with the others
    standing in with zeros; join returns the last rank everywhere."""
    if rank != n - 1:
        last = int(hvd.join())
    else:
        for _ in range(2):
            check("allreduce beside joined ranks", hvd.allreduce(tf.fill([5], 4.0), op=hvd.Sum),
                  np.full(5, 4.0))
        check("average beside joined ranks", hvd.allreduce(tf.fill([3], 4.0)),
              np.full(3, 4.0 / n))
        last = int(hvd.join())
    if last != n - 1:
        sys.exit(f"rank {rank}: join returned {last}, expected {n - 1}")
    check("allreduce after join", hvd.allreduce(tf.constant([1.0]), op=hvd.Sum), [n])


def reducescatter():
    x = tf.reshape(tf.range(2 * n * 3, dtype=tf.float32), [2 * n, 3]) + rank
    ranks = n * (n - 1) / 2
    full = np.arange(2 * n * 3, dtype=np.float64).reshape(2 * n, 3) * n + ranks
    check("reducescatter sum", hvd.reducescatter(x, op=hvd.Sum), full[2 * rank:2 * rank + 2])
    uneven = tf.ones([n + 1, 2]) * (rank + 1)
    rows = 2 if rank == 0 else 1
    check("reducescatter uneven avg", hvd.reducescatter(uneven, op=hvd.Average),
          np.full((rows, 2), (n + 1) / 2))
    check("reducescatter int prescale", hvd.reducescatter(tf.fill([n], 10), op=hvd.Sum,
                                                          prescale_factor=0.25), [2 * n])
    factor = 0.123456789012345  # a float64 factor must not be rounded to float32 on the way
    value = tf.constant([7.60786438], tf.float64)
    got = hvd.allreduce(value, op=hvd.Sum, postscale_factor=factor).numpy()
    if got[0] != np.float64(7.60786438) * n * factor:
        sys.exit(f"rank {rank}: float64 postscale: {got[0]!r}, expected "
                 f"{np.float64(7.60786438) * n * factor!r}")
    variable = tf.Variable(tf.ones([n, 2]))
    with tf.GradientTape() as tape:
        out = hvd.reducescatter(variable * 1.0, op=hvd.Sum)
    check("reducescatter gradient", tape.gradient(out, variable), np.full((n, 2), n))


def small_calls():
    gathered = hvd.grouped_allgather([tf.fill([rank + 1], float(rank)), tf.constant([[rank]])])
    check("grouped_allgather 0", gathered[0], [float(r) for r in range(n) for _ in range(r + 1)])
    check("grouped_allgather 1", gathered[1], [[r] for r in range(n)])
    variable = tf.Variable([float(rank), 1.0])
    hvd.broadcast_([variable], root_rank=n - 1)
    check("broadcast_ in place", variable, [n - 1.0, 1.0])
    check("rank_op", hvd.rank_op(), rank)
    check("size_op", hvd.size_op(), n)


def op_errors():
    for kind, text, call in [
            (ValueError, "The op parameter supersedes average. Please provide only one of them.",
             lambda: hvd.grouped_allreduce([tf.ones([2])], average=True, op=hvd.Sum)),
            (NotImplementedError, "hvd.DistributedGradientTape: op Adasum is not supported by "
             "horovod.tensorflow on libddl (libddl has no Adasum reduction): use hvd.Average or "
             "hvd.Sum", lambda: hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Adasum))]:
        try:
            call()
            sys.exit(f"rank {rank}: no {kind.__name__}: {text}")
        except kind as e:
            if str(e) != text:
                sys.exit(f"rank {rank}: got {e}, expected {text}")


def graph_broadcast():
    graph = tf.Graph()
    with graph.as_default():
        weight = tf.compat.v1.get_variable("w", initializer=tf.constant([float(rank)] * 3))
        sync = hvd.broadcast_global_variables(0)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(sync)
            check("broadcast_global_variables", session.run(weight), [0.0] * 3)


def sync_batch_norm():
    every = np.arange(4 * n * 2, dtype=np.float32).reshape(4 * n, 2) ** 1.5
    layer = hvd.SyncBatchNormalization(axis=1, momentum=0.0)
    out = layer(every[4 * rank:4 * rank + 4], training=True)
    mean, var = every.mean(0), every.var(0)
    expected = (every[4 * rank:4 * rank + 4] - mean) / np.sqrt(var + layer.epsilon)
    check("SyncBatchNormalization output", out, expected, tol=1e-4)
    check("SyncBatchNormalization moving mean", layer.moving_mean, mean, tol=1e-2)


def keras2_aggregation():
    keras = tf.keras
    if not keras.__name__.startswith("tf_keras"):
        return  # no tf-keras in this Python
    x = tf.Variable([0.0])
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2)

    @tf.function
    def step():
        pairs = opt._compute_gradients(lambda: -x * float(rank + 1), var_list=[x])
        opt.apply_gradients(pairs)

    for passes in range(1, 6):
        step()
        applied = passes // 2  # each apply: the two passes' summed gradient, averaged
        check(f"backward_passes_per_step pass {passes}", x, [applied * 2 * (n + 1) / 2])
    check("aggregation counter", opt._agg_helper.counter, 1)
    check("iterations", opt.iterations, 5)


join()
reducescatter()
small_calls()
op_errors()
graph_broadcast()
sync_batch_norm()
keras2_aggregation()
print(f"rank {rank} of {n} ok", flush=True)
