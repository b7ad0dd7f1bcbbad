"""A Keras script on Horovod's API (horovod.tensorflow.keras, here on libddl): model.fit with
hvd.DistributedOptimizer and Horovod's callbacks, then a custom training loop in a tf.function
with hvd.DistributedGradientTape and hvd.broadcast_variables. Keras 3 (tf.keras of TensorFlow
2.16+), or with --legacy-keras Keras 2 (tf-keras, through TF_USE_LEGACY_KERAS=1, with one of its
legacy optimizers in model.fit), as older Horovod scripts have it.

    build/ddlrun/ddlrun -H localhost:2 python examples/keras_horovod_synthetic.py [--check]
                                                                      [--legacy-keras]

How it works: every rank makes the same synthetic regression data (seeded) and trains on rows
rank, rank+size, ... of it, from its own random weights, which the broadcast replaces by rank
0's; the gradients are averaged over the ranks (one fused allreduce per step inside the
compiled step), the learning rate warms up to lr * size over the first epoch and the epoch's
metrics are averaged. --check verifies both parts: every rank's weights are bitwise identical,
and they (and each epoch's loss) match this process trained alone, from rank 0's initial
weights, on the combined batches of every step. Each rank prints "rank R of N ok".
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
LEGACY = "--legacy-keras" in sys.argv
if LEGACY:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402 (Keras 3, or tf-keras under --legacy-keras)

import horovod.tensorflow as hvd_tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="tanh"),
                             keras.layers.Dense(4)])


def flat(model):
    return np.concatenate([w.reshape(-1) for w in model.get_weights()])


def fit(model, x, y, args, lr, distributed):
    """model.fit for a few epochs; distributed: through Horovod's optimizer and callbacks."""
    optimizer = (keras.optimizers.legacy.Adam if LEGACY else keras.optimizers.Adam)(
        learning_rate=lr)
    callbacks = [hvd.callbacks.LearningRateWarmupCallback(initial_lr=lr, warmup_epochs=1,
                                                          steps_per_epoch=args.steps)]
    if distributed:
        optimizer = hvd.DistributedOptimizer(optimizer)
        callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                     hvd.callbacks.MetricAverageCallback()] + callbacks
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False if not distributed
                  else (True if LEGACY else "auto"))
    return model.fit(x, y, batch_size=len(x) // args.steps, epochs=args.epochs, shuffle=False,
                     verbose=0, callbacks=callbacks)


def custom_loop(model, batches, lr, distributed):
    """Plain SGD steps in a tf.function: gradients through DistributedGradientTape."""
    optimizer = keras.optimizers.SGD(learning_rate=lr)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        if distributed:
            tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if distributed:  # rank 0's initial weights everywhere, from a tf.function as well
        tf.function(lambda: hvd_tf.broadcast_variables(model.variables, root_rank=0))()
    for x, y in batches:
        step(x, y)


def same_everywhere(weights):
    return (np.array_equal(hvd.allreduce(weights, op=hvd.Max).numpy(), weights)
            and np.array_equal(hvd.allreduce(weights, op=hvd.Min).numpy(), weights))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="steps per epoch")
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--lr", type=float, default=0.005, help="for one rank; scaled by size")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--legacy-keras", action="store_true",
                        help="Keras 2 (tf-keras) instead of Keras 3")
    args = parser.parse_args()
    if LEGACY and not keras.__name__.startswith("tf_keras"):
        sys.exit(f"--legacy-keras: tf.keras is {keras.__name__}, not tf-keras: pip install "
                 "tf-keras")

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    generator = np.random.default_rng(7)
    samples = size * args.batch_size * args.steps
    x = generator.standard_normal((samples, 16)).astype(np.float32)
    y = np.tanh(x[:, :4] * 2.0 - x[:, 4:8]).astype(np.float32)
    lr = args.lr * size
    model = make_model(seed=rank)
    history = fit(model, x[rank::size], y[rank::size], args, lr, distributed=True)
    if rank == 0:
        print(f"epoch losses (mean over {size} ranks): {history.history['loss']}", flush=True)
    # Step k used rows k*b..(k+1)*b of every rank's shard: one combined batch.
    b = args.batch_size
    order = [r + size * i for k in range(args.steps) for r in range(size)
             for i in range(k * b, (k + 1) * b)]
    shard_batches = [(x[rank::size][k * b:(k + 1) * b], y[rank::size][k * b:(k + 1) * b])
                     for k in range(args.steps)]
    loop_model = make_model(seed=100 + rank)
    custom_loop(loop_model, shard_batches, lr, distributed=True)
    if args.check:
        for what, m in (("fit", model), ("custom loop", loop_model)):
            if not same_everywhere(flat(m)):
                sys.exit(f"rank {rank}: {what}: the ranks' weights differ")
        reference = make_model(seed=0)
        expected = fit(reference, x[order], y[order], args, lr, distributed=False)
        difference = np.abs(flat(reference) - flat(model)).max()
        if difference > 1e-4 or not np.allclose(history.history["loss"],
                                                expected.history["loss"], rtol=1e-4):
            sys.exit(f"rank {rank}: fit differs from the single-process reference: weights by "
                     f"{difference:g}, losses {history.history['loss']} vs "
                     f"{expected.history['loss']}")
        loop_reference = make_model(seed=100)
        custom_loop(loop_reference, [(x[order][k * size * b:(k + 1) * size * b],
                                      y[order][k * size * b:(k + 1) * size * b])
                                     for k in range(args.steps)], lr, distributed=False)
        difference = np.abs(flat(loop_reference) - flat(loop_model)).max()
        if difference > 1e-5:
            sys.exit(f"rank {rank}: custom loop differs from the single-process reference by "
                     f"{difference:g}")
    print(f"rank {rank} of {size} ok", flush=True)


main()
