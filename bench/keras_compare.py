"""One Keras 3 model's training step time, data-parallel on N ranks, through ddl
(`--mode ddl`, run under ddlrun: ddl.tensorflow.DistributedGradientTape, rank 0's weights by
ddl.tensorflow.broadcast_variables) or through TensorFlow's own
tf.distribute.MultiWorkerMirroredStrategy (`--mode mwms`, one process per worker, TF_CONFIG set
by bench/keras_compare.sh). Rank/worker 0 prints one line:

    keras_compare: mode=ddl ranks=4 params=1234 batch=64 step_ms=12.3 loss=0.123

How it works: the same model (an MLP of --hidden units, --layers deep, on --features inputs),
the same synthetic data (seeded), the same per-rank batch and the same training step (a
tf.function: forward, tape.gradient, Keras SGD's apply_gradients) in both modes; only the
gradient reduction differs: ddl's fused allreduce inside the tape's gradient(), or the
strategy's collectives inside apply_gradients. A custom loop, not model.fit, because Keras 3's
fit does not run under MultiWorkerMirroredStrategy. --warmup steps run first, then --steps timed
ones; step_ms is their mean. MultiWorkerMirroredStrategy gets the global batch (per-rank batch x
ranks) and shards it itself; under ddl each rank takes its own rows. XLA is off in both.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402


def make_model(args):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((args.features,))]
    layers += [keras.layers.Dense(args.hidden, activation="relu") for _ in range(args.layers)]
    model = keras.Sequential(layers + [keras.layers.Dense(10)])
    return model


def make_step(model, optimizer, loss_of, tape_of):
    """One training step as a tf.function: loss, gradients (tape_of wraps the tape), update."""

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(y, model(x, training=True))
        grads = tape_of(tape).gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def run_steps(step, batches):
    """Runs step on each batch; the losses and the time after each step (and before the first)."""
    losses, times = [], [time.perf_counter()]
    for x, y in batches:
        losses.append(step(x, y))
        times.append(time.perf_counter())
    return losses, times


def ddl_trainer(args, x, y, size):
    """ddl: this rank's rows, rank 0's initial weights, gradients averaged by ddl's fused op."""
    import ddl.tensorflow as dtf

    def train():
        model = make_model(args)
        optimizer = keras.optimizers.SGD(learning_rate=0.01 * size, momentum=0.9)
        dtf.broadcast_variables(model.variables, root=0)
        loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        step = make_step(model, optimizer, loss_of, dtf.DistributedGradientTape)
        batches = [(x[i:i + args.batch], y[i:i + args.batch]) for i in range(0, len(x), args.batch)]
        return (model,) + run_steps(step, batches)

    return train


def mwms_trainer(args, x, y, size):
    """MultiWorkerMirroredStrategy: the global batch, sharded by the strategy; each replica's
    loss is its examples' sum over the global batch, and the optimizer sums the replicas'
    gradients (Keras 3's model.fit does not run under this strategy: keras-team/keras#20585)."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    global_batch = size * args.batch

    def train():
        with strategy.scope():
            model = make_model(args)
            optimizer = keras.optimizers.SGD(learning_rate=0.01 * size, momentum=0.9)
        per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                 reduction="none")

        def loss_of(labels, logits):
            return tf.nn.compute_average_loss(per_example(labels, logits),
                                              global_batch_size=global_batch)

        step = make_step(model, optimizer, loss_of, lambda tape: tape)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
        batches = iter(strategy.experimental_distribute_dataset(data))

        def replicated(xs, ys):
            return strategy.reduce("SUM", strategy.run(step, args=(xs, ys)), axis=None)

        return (model,) + run_steps(replicated, batches)

    return train


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("ddl", "mwms"), required=True)
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--features", type=int, default=784)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    steps = args.warmup + args.steps
    if args.mode == "ddl":
        import ddl

        rank, size = ddl.rank(), ddl.size()
    else:
        config = json.loads(os.environ["TF_CONFIG"])
        rank, size = config["task"]["index"], len(config["cluster"]["worker"])
    generator = np.random.default_rng(1)
    samples = size * args.batch * steps
    x = generator.standard_normal((samples, args.features)).astype(np.float32)
    y = generator.integers(0, 10, samples)
    if args.mode == "ddl":
        train = ddl_trainer(args, x[rank::size], y[rank::size], size)
    else:
        train = mwms_trainer(args, x, y, size)
    model, losses, times = train()
    step_ms = 1000 * (times[-1] - times[args.warmup]) / max(1, args.steps)
    if rank == 0:
        print(f"keras_compare: mode={args.mode} ranks={size} params={model.count_params()} "
              f"batch={args.batch} step_ms={step_ms:.2f} loss={float(losses[-1]):.4f}",
              flush=True)


main()
