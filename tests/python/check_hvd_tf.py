"""horovod.tensorflow's calls beyond the basic four, on N ranks: join with uneven data,
reducescatter (even, uneven, scaled, its gradient), grouped_allgather, broadcast_ in place, the
*_op tensors, broadcast_global_variables in a Session graph, SyncBatchNormalization against one
batch norm over every rank's rows, Keras 2 (tf-keras) DistributedOptimizer with
backward_passes_per_step=2, the op errors horovod.torch gives too, and process sets (two
overlapping sets: the collectives, their gradients, DistributedGradientTape, the objects and the
*_op tensors, eagerly and in tf.function, a mismatch inside a set failing on its members only,
a call outside a set refused). Each rank prints "rank R of N ok".

How it works: rank r contributes values made from r, so every result is known in closed form;
a process set's results are computed by numpy in this one process from its members' values.
The script sets TF_USE_LEGACY_KERAS=1 itself (tf.keras is tf-keras here).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import ddl  # noqa: E402
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


def value(r, shape=(3,)):
    """Rank r's contribution: a float32 array made from r."""
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1) * (r + 1)


def set_collectives(ps, mode):
    """The collectives on ps (this rank is a member), checked against numpy over its members'
    values; in a tf.function for mode "graph"."""
    members, me = ps.ranks, ps.rank()
    splits = [1 + m % 2 for m in range(len(members))]

    def calls(x):
        return [hvd.allreduce(x, op=hvd.Sum, process_set=ps),
                hvd.allreduce(x, process_set=ps),
                hvd.allgather(tf.fill([rank + 1], float(rank)), process_set=ps),
                hvd.broadcast(x, root_rank=members[-1], process_set=ps),
                hvd.alltoall(tf.fill([sum(splits)], float(rank)), splits=splits,
                             process_set=ps)[0],
                hvd.reducescatter(tf.reshape(tf.tile(x, [2 * len(members)]), [-1, 3]),
                                  op=hvd.Sum, process_set=ps)]

    run = tf.function(calls) if mode == "graph" else calls
    got = run(tf.constant(value(rank)))
    every = np.stack([value(m) for m in members])
    rows = 2 * len(members) // len(members)
    expected = [every.sum(0), every.mean(0),
                [float(m) for m in members for _ in range(m + 1)], value(members[-1]),
                [float(m) for m in members for _ in range(splits[me])],
                np.tile(every.sum(0), [rows, 1])]
    for what, g, e in zip(["allreduce sum", "allreduce average", "allgather", "broadcast",
                           "alltoall", "reducescatter"], got, expected):
        check(f"{mode}: set {members}: {what}", g, np.asarray(e, dtype=np.float64), tol=1e-5)


def sets_beside_global(sets):
    """One tf.function that every rank runs: an allreduce on each set this rank is in, then a
    global one (the ranks outside a set build no op of it, so the global op's name must not
    depend on them)."""

    @tf.function
    def step(x):
        mine = [hvd.allreduce(x, op=hvd.Sum, process_set=ps) for ps in sets if rank in ps.ranks]
        return mine + [hvd.allreduce(x, op=hvd.Sum)]

    got = step(tf.constant(value(rank)))
    expected = [np.stack([value(m) for m in ps.ranks]).sum(0) for ps in sets
                if rank in ps.ranks] + [np.stack([value(r) for r in range(n)]).sum(0)]
    for g, e in zip(got, expected):
        check("graph: set allreduces beside a global one", g, e)


def set_gradients(ps, mode):
    """DistributedGradientTape and the gradients of allgather and broadcast on ps."""
    members = ps.ranks
    w = tf.Variable(value(rank))

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * float(rank + 1))
        averaged = hvd.DistributedGradientTape(tape, process_set=ps).gradient(loss, [w])[0]
        with tf.GradientTape(persistent=True) as tape:
            gathered = hvd.allgather(w * 1.0, process_set=ps)
            sent = hvd.broadcast(w * 1.0, root_rank=members[0], process_set=ps)
            loss_g = tf.reduce_sum(gathered * float(rank + 1))
            loss_b = tf.reduce_sum(sent * float(rank + 1))
        return averaged, tape.gradient(loss_g, w), tape.gradient(loss_b, w)

    averaged, gather_grad, bcast_grad = tf.function(grads)() if mode == "graph" else grads()
    mean = np.mean([m + 1.0 for m in members])
    check(f"{mode}: set {members}: DistributedGradientTape", averaged, np.full(3, mean))
    check(f"{mode}: set {members}: allgather gradient", gather_grad, np.full(3, mean))
    check(f"{mode}: set {members}: broadcast gradient", bcast_grad,
          np.full(3, mean if rank == members[0] else 0.0))


def set_mismatch(ps):
    """Members call a collective of one name with different shapes: it fails on each, and
    the set's next call runs."""
    try:
        hvd.allreduce(tf.ones([2 + ps.rank()]), name="mismatched", process_set=ps)
        sys.exit(f"rank {rank}: a mismatch inside set {ps.ranks} did not raise")
    except tf.errors.FailedPreconditionError as e:
        if "mismatched" not in str(e):
            sys.exit(f"rank {rank}: the mismatch error does not name the call: {e}")
    check("after the mismatch", hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=ps),
          np.full(2, len(ps.ranks)))


def set_objects_and_ops(ps):
    members = ps.ranks
    check("allgather_object", np.array(hvd.allgather_object(rank * 10, process_set=ps)),
          np.array([m * 10 for m in members]))
    obj = hvd.broadcast_object({"from": rank}, root_rank=members[-1], process_set=ps)
    if obj != {"from": members[-1]}:
        sys.exit(f"rank {rank}: broadcast_object on set {members}: {obj}")
    variables = [tf.Variable(value(rank))]
    hvd.broadcast_variables(variables, root_rank=members[0], process_set=ps)
    check("broadcast_variables", variables[0], value(members[0]))
    check("size_op", hvd.size_op(process_set_id=ps.process_set_id), len(members))
    check("ddl.allreduce with group", ddl.allreduce(tf.constant(value(rank)), group=ps.group),
          np.stack([value(m) for m in members]).sum(0))


def outside_tape(ps):
    """On a rank outside ps, DistributedGradientTape and DistributedOptimizer on ps leave the
    gradients this rank's own (Horovod's)."""
    w = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = w * float(rank + 1)
    check("DistributedGradientTape outside the set",
          hvd.DistributedGradientTape(tape, process_set=ps).gradient(loss, [w])[0], [rank + 1.0])
    opt = hvd_keras.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), process_set=ps)
    opt.apply_gradients([(tf.constant([float(rank)]), w)])
    check("DistributedOptimizer outside the set", w, [1.0 - rank])


def process_sets():
    """Sets [0, n-1] and [1, n-1] (overlapping at rank n-1); each member runs its sets'
    calls, the others go on; a call outside a set is refused."""
    sets = [hvd.add_process_set([0, n - 1]), hvd.add_process_set(range(1, n))]
    sets_beside_global(sets)
    for ps in sets:
        included = hvd.process_set_included_op(process_set_id=ps.process_set_id)
        check(f"process_set_included_op {ps.ranks}", included, int(rank in ps.ranks))
        if rank not in ps.ranks:
            outside_tape(ps)
            text = (f"hvd.allgather: this rank ({rank}) is not in {ps!r}: call it on the "
                    "set's members only")
            try:
                hvd.allgather(tf.ones([1]), process_set=ps)
                sys.exit(f"rank {rank}: a call outside {ps!r} did not raise")
            except tf.errors.InvalidArgumentError as e:
                if e.message != text:
                    sys.exit(f"rank {rank}: got {e}, expected {text}")
            continue
        for mode in ("eager", "graph"):
            set_collectives(ps, mode)
            set_gradients(ps, mode)
        set_mismatch(ps)
        set_objects_and_ops(ps)
    hvd.allreduce(tf.zeros([1]), name="process_sets_done")
    for ps in sets:
        hvd.remove_process_set(ps)


join()
reducescatter()
small_calls()
op_errors()
graph_broadcast()
sync_batch_norm()
keras2_aggregation()
process_sets()
print(f"rank {rank} of {n} ok", flush=True)
