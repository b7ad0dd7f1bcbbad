"""Training that survives restarts: checkpoints every few steps, resumes from the last one.

    PYTHONPATH=build/python build/ddlrun/ddlrun -H node1:2,node2:2,node3:2 --max-restarts 2 \
        --min-hosts 2 /usr/bin/python3 examples/train_elastic.py --checkpoint-dir /shared/ckpt

How it works: the data of step t is the same whatever the number of ranks: a global batch made
from a generator seeded with t, of which each of the N ranks takes its 1/N slice; gradients are
averaged over the ranks (ddl.torch.DistributedOptimizer), so each step is one step of the same
global batch. Every --every steps rank 0 writes a checkpoint (step, model, optimizer state)
atomically: to a temporary file in the directory, then renamed over ckpt.pt, so a rank killed
mid-write leaves the previous checkpoint whole. At the start rank 0 loads ckpt.pt when there is
one and gives it to every rank (broadcast_object), so the job resumes where the last checkpoint
left it, with however many ranks it now has: when ddlrun restarts a job on fewer hosts
(--max-restarts), the script needs nothing more. The directory comes from --checkpoint-dir, else
$DDL_CHECKPOINT_DIR; it must be one every host sees (rank 0 may move). Rank 0 prints the attempt
(DDL_RESTART_COUNT) and the step it starts from, each checkpoint, the wall-clock time of its
first step, and at the end the digest of the final weights. With --backend the same runs on
torch.distributed instead of the ddl package (and then under torchrun too, for comparison).
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn.functional as F

import ddl
import ddl.torch as dt

FEATURES, CLASSES = 32, 10


def batch(step, size, rank, global_batch):
    """This rank's slice of step `step`'s global batch: the same data for any number of ranks."""
    generator = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(global_batch, FEATURES, generator=generator)
    y = torch.randint(0, CLASSES, (global_batch,), generator=generator)
    share = global_batch // size
    return x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]


class DdlPackage:
    """Ranks, gradient averaging and broadcast through the ddl package (under ddlrun)."""

    def __init__(self):
        self.rank, self.size = ddl.rank(), ddl.size()

    def optimizer(self, optimizer):
        return dt.DistributedOptimizer(optimizer)

    def broadcast_object(self, obj):
        return dt.broadcast_object(obj, root_rank=0)


class TorchDistributed:
    """The same through torch.distributed with `backend` (gloo, or ddl under ddlrun): the
    script then also runs under torchrun, for comparison."""

    def __init__(self, backend):
        torch.distributed.init_process_group(backend)
        self.rank = torch.distributed.get_rank()
        self.size = torch.distributed.get_world_size()

    def optimizer(self, optimizer):
        step = optimizer.step

        def averaged_step(closure=None):
            for group in optimizer.param_groups:
                for p in group["params"]:
                    torch.distributed.all_reduce(p.grad)
                    p.grad /= self.size
            return step(closure)

        optimizer.step = averaged_step
        return optimizer

    def broadcast_object(self, obj):
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]


def save(directory, state, keep):
    """Writes `state` to directory/ckpt.pt atomically, then with `keep` to ckpt-<step>.pt."""
    os.makedirs(directory, exist_ok=True)
    names = ["ckpt.pt"] + ([f"ckpt-{state['step']}.pt"] if keep else [])
    for name in names:
        tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(directory, name))


def load(directory, comm):
    """The last checkpoint in `directory`, or None (read by rank 0, given to the others)."""
    path = os.path.join(directory, "ckpt.pt")
    state = torch.load(path) if comm.rank == 0 and os.path.exists(path) else None
    return comm.broadcast_object(state)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", default=os.environ.get("DDL_CHECKPOINT_DIR"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5, help="steps between checkpoints")
    parser.add_argument("--global-batch", type=int, default=24)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--step-delay", type=float, default=0.0, help="seconds, to watch it")
    parser.add_argument("--keep", action="store_true", help="keep every checkpoint too")
    parser.add_argument("--backend", help="a torch.distributed backend (gloo, ddl) instead of "
                        "the ddl package")
    args = parser.parse_args()
    if not args.checkpoint_dir:
        sys.exit("train_elastic: give --checkpoint-dir DIR or set DDL_CHECKPOINT_DIR")

    torch.set_num_threads(1)
    torch.manual_seed(0)
    comm = TorchDistributed(args.backend) if args.backend else DdlPackage()
    rank, size = comm.rank, comm.size
    if args.global_batch % size:
        sys.exit(f"train_elastic: --global-batch {args.global_batch} is not a multiple of the "
                 f"{size} ranks")
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, CLASSES))
    optimizer = comm.optimizer(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9))
    state = load(args.checkpoint_dir, comm)
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    attempt = os.environ.get("DDL_RESTART_COUNT",
                             os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if rank == 0:
        print(f"attempt {attempt}: {size} ranks, starting at step {start}", flush=True)

    for step in range(start, args.steps):
        x, y = batch(step, size, rank, args.global_batch)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if rank == 0 and step == start:
            print(f"attempt {attempt}: first step done at {time.time():.3f}", flush=True)
        if (step + 1) % args.every == 0 and rank == 0:
            save(args.checkpoint_dir, {"step": step + 1, "model": model.state_dict(),
                                       "optimizer": optimizer.state_dict()}, args.keep)
            print(f"checkpoint step {step + 1}", flush=True)
        time.sleep(args.step_delay)

    weights = torch.cat([p.detach().reshape(-1) for p in model.state_dict().values()])
    if rank == 0:
        digest = hashlib.sha256(weights.numpy().tobytes()).hexdigest()[:16]
        print(f"final weights sha256 {digest} after {args.steps} steps", flush=True)
    print(f"rank {rank} of {size} ok", flush=True)


main()
