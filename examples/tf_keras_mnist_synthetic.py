"""IBM's tf.keras recipe on ddl: a small CNN trained data-parallel on synthetic MNIST-shaped
data with `import ddl`, ddl.DDLCallback() first, ddl.DDLGlobalVariablesCallback() last, each
rank on its own shard and the learning rate scaled by the number of ranks.

    build/ddlrun/ddlrun -H localhost:2 python examples/tf_keras_mnist_synthetic.py \
        [--epochs 2 --steps 5 --check]

How it works: every rank makes the same synthetic data (seeded: 10 classes, each a fixed random
28x28 pattern plus noise) and trains on rows rank, rank+size, ... of it; its model starts from
its own random weights, which DDLGlobalVariablesCallback replaces by rank 0's. DDLCallback makes
the optimizer average the gradients over the ranks and averages the epoch's metrics, which rank
0 prints. --check then verifies what data parallelism promises: every rank's weights are
bitwise identical (their element-wise max and min over the ranks equal its own), and they match
(and so does every epoch's loss) a model trained in this process alone, from rank 0's initial
weights, on the combined batches of every step. Each rank prints "rank R of N ok".
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import ddl  # noqa: E402
from tensorflow import keras  # noqa: E402


def synthetic_mnist(samples, seed=1234):
    """`samples` 28x28x1 images and labels 0..9, the same on every rank."""
    generator = np.random.default_rng(seed)
    patterns = generator.standard_normal((10, 28, 28, 1)).astype(np.float32)
    labels = generator.integers(0, 10, samples)
    noise = generator.standard_normal((samples, 28, 28, 1)).astype(np.float32)
    return 0.5 * patterns[labels] + noise, labels


def make_model(seed, lr, jit_compile="auto"):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=jit_compile)  # "auto": XLA, which DDLCallback turns off
    return model


def flat(model):
    return np.concatenate([w.reshape(-1) for w in model.get_weights()])


def check(model, history, images, labels, args, lr):
    """Identical weights on every rank, equal to this process's single-rank reference."""
    rank, size = ddl.rank(), ddl.size()
    weights = flat(model)
    if not (np.array_equal(ddl.allreduce(weights.copy(), op="max"), weights)
            and np.array_equal(ddl.allreduce(weights.copy(), op="min"), weights)):
        sys.exit(f"rank {rank}: the ranks' weights differ")
    # Step k of the job used rows k*b..(k+1)*b of every rank's shard: one combined batch.
    b = args.batch_size
    order = [r + size * i for k in range(args.steps) for r in range(size)
             for i in range(k * b, (k + 1) * b)]
    reference = make_model(0, lr, jit_compile=False)
    expected = reference.fit(images[order], labels[order], batch_size=size * b,
                             epochs=args.epochs, shuffle=False, verbose=0)
    difference = np.abs(flat(reference) - weights).max()
    if difference > 1e-4:
        sys.exit(f"rank {rank}: weights differ from the single-process reference by "
                 f"{difference:g}")
    ours, theirs = history.history["loss"], expected.history["loss"]
    if not np.allclose(ours, theirs, rtol=1e-4):
        sys.exit(f"rank {rank}: epoch losses {ours} differ from the reference's {theirs}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40, help="steps per epoch")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="for one rank; scaled by size")
    parser.add_argument("--check", action="store_true",
                        help="compare with a single-process run on the combined batches")
    args = parser.parse_args()

    rank, size = ddl.rank(), ddl.size()
    images, labels = synthetic_mnist(size * args.batch_size * args.steps)
    lr = args.lr * size
    model = make_model(seed=rank, lr=lr)  # different on each rank: the broadcast must fix it
    history = model.fit(images[rank::size], labels[rank::size], batch_size=args.batch_size,
                        epochs=args.epochs, shuffle=False, verbose=2 if rank == 0 else 0,
                        callbacks=[ddl.DDLCallback(), ddl.DDLGlobalVariablesCallback()])
    if args.check:
        check(model, history, images, labels, args, lr)
    print(f"rank {rank} of {size} ok", flush=True)


main()
