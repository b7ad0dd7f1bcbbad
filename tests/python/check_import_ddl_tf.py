"""IBM's TensorFlow recipe, `import ddl` alone, on N ranks: model.fit, a GradientTape loop with
apply_gradients and a tf.compat.v1 optimizer in a Session graph each train together (every
rank ends with the same weights, from different data and different initial weights), rank 0
says so once on standard error, gradients a DistributedGradientTape reduced are not reduced
again, the trained model saves and loads in a Python that never imports ddl, and IBM's op
names work (ddl.init(gpuid) returning the job's shape, ddl.bcast,
ddl.all_reduce_n with mpi= and check=). With --tf-keras, Keras is tf-keras
(TF_USE_LEGACY_KERAS=1) and its legacy optimizer is used too. Each rank prints
"rank R of N ok".
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
TF_KERAS = "--tf-keras" in sys.argv
if TF_KERAS:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402

import ddl  # noqa: E402 (before TensorFlow, as IBM's scripts do; it must not import it)

assert "tensorflow" not in sys.modules, "import ddl imported TensorFlow"
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

import ddl.tensorflow as dtf  # noqa: E402

rank, n = ddl.rank(), ddl.size()
reductions = []
counted = dtf.reduce_gradients
dtf.reduce_gradients = lambda grads, op="avg": reductions.append(1) or counted(grads, op)


def same_everywhere(what, values):
    flat = np.concatenate([np.asarray(v, np.float64).reshape(-1) for v in values])
    high = ddl.allreduce(flat.copy(), op="max")
    if not np.array_equal(high, ddl.allreduce(flat.copy(), op="min")):
        sys.exit(f"rank {rank}: {what}: the ranks' weights differ")
    return flat


def data(rows=32):
    generator = np.random.default_rng(rank)  # every rank its own data
    x = generator.standard_normal((rows, 4)).astype(np.float32)
    return x, (x @ np.arange(4, dtype=np.float32)[:, None]).astype(np.float32)


def fit():
    keras.utils.set_random_seed(100 + rank)  # every rank its own initial weights
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    opt = keras.optimizers.legacy.SGD(0.05) if TF_KERAS else keras.optimizers.SGD(0.05)
    model.compile(optimizer=opt, loss="mse")
    x, y = data()
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    same_everywhere("model.fit", model.get_weights())
    saves_and_loads_without_ddl(model, x)


def saves_and_loads_without_ddl(model, x):
    """The trained model saved, then loaded by a Python that never imports ddl."""
    import subprocess  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.h5" if TF_KERAS else "model.keras")
        model.save(path)
        np.save(os.path.join(folder, "x.npy"), x)
        np.save(os.path.join(folder, "y.npy"), model.predict(x, verbose=0))
        code = ("import sys, numpy as np; from tensorflow import keras; "
                f"m = keras.models.load_model({path!r}); "
                f"d = {folder!r}; p = m.predict(np.load(d + '/x.npy'), verbose=0); "
                "assert 'ddl' not in sys.modules, 'loading imported ddl'; "
                "assert np.allclose(p, np.load(d + '/y.npy')), 'predictions differ'")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DDL_", "PYTHONPATH"))}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            sys.exit(f"rank {rank}: the model does not load without ddl: {done.stderr[-800:]}")


def tape_loop():
    keras.utils.set_random_seed(200 + rank)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(0.01)
    x, y = data()
    for step in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    same_everywhere("GradientTape loop", model.get_weights())
    before = len(reductions)
    with dtf.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    if len(reductions) - before != 1:
        sys.exit(f"rank {rank}: a DistributedGradientTape's gradients were reduced "
                 f"{len(reductions) - before} times")


def compat_v1():
    graph = tf.Graph()
    with graph.as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([[float(rank)]] * 4))
        x, y = data()
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(loss)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(3):
                session.run(train)
            same_everywhere("tf.compat.v1 optimizer", [session.run(w)])


def ibm_names():
    shape = [int(t) for t in ddl.init(3, mode="-mode r:2")]
    if shape != [rank, n, ddl.local_rank(), ddl.local_size(), 3]:
        sys.exit(f"rank {rank}: ddl.init(3): {shape}")
    if float(ddl.bcast(tf.constant([float(rank)]), 0)[0]) != 0.0:
        sys.exit(f"rank {rank}: ddl.bcast")
    for mpi in (False, True):
        out = ddl.all_reduce_n([tf.constant([rank + 1.0]), tf.constant([2.0])], op="sum",
                               mpi=mpi, check=1e-6)
        if [float(t[0]) for t in out] != [n * (n + 1) / 2, 2.0 * n]:
            sys.exit(f"rank {rank}: ddl.all_reduce_n(mpi={mpi}): {out}")


saved = os.dup(2)
with tempfile.TemporaryFile() as err:
    os.dup2(err.fileno(), 2)
    try:
        fit()
        tape_loop()
        compat_v1()
    finally:
        os.dup2(saved, 2)
    err.seek(0)
    said = [line for line in err.read().decode().splitlines() if line.startswith("ddl:")]
ibm_names()
wanted = 4 if TF_KERAS else 3  # fit's, the loop's and v1's optimizer classes (tf-keras: 2 SGDs)
if rank == 0 and (len(said) != len(set(said)) or not 2 <= len(said) <= wanted):
    sys.exit(f"rank 0: what import ddl said on standard error: {said}")
if rank != 0 and said:
    sys.exit(f"rank {rank}: said {said}; only rank 0 speaks")
print(f"rank {rank} of {n} ok", flush=True)
