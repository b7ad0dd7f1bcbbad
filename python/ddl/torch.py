"""ddl.torch: Horovod-style data parallelism for PyTorch scripts, over ddl's collectives.

How it works: every rank runs the same script on its own shard of the data (DistributedSampler,
by ddl.rank()). The model starts identical everywhere (broadcast_parameters from rank 0), and
DistributedOptimizer averages the gradients over the ranks during the backward pass: hooks on
the gradient accumulators start a fused ddl.allreduce_n of each bucket of gradients as soon as
the bucket is complete, on ddl's worker thread, while autograd computes the earlier layers
(ddl._fusion, the same code as horovod.torch's); step() waits for the rest, so each rank
applies the same update to the same weights. libddl's results are bitwise identical on every
rank, so the weights stay bitwise identical. All of it is plain Python over ddl's zero-copy
calls on CPU tensors. Importing this module also registers the torch.distributed backend "ddl"
(a C++ ProcessGroup over libddl, the extension ddl._torch_pg) for scripts that use
init_process_group("ddl") and DistributedDataParallel instead.

    import ddl, ddl.torch as dt
    model = Net()
    opt = dt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=dt.scale_lr(0.01)))
    dt.broadcast_parameters(model.state_dict(), root_rank=0)
    dt.broadcast_optimizer_state(opt, root_rank=0)
    for x, y in DataLoader(data, batch_size=32, sampler=dt.DistributedSampler(data)):
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
"""

import io
import math
import os

import numpy
import torch

import ddl
from ddl import _binaries
from ddl._fusion import GradientReducer
from ddl._site.sitecustomize import register_backend

__all__ = [
    "DistributedOptimizer", "DistributedSampler", "allreduce_metric", "broadcast_object",
    "broadcast_optimizer_state", "broadcast_parameters", "scale_lr",
]


def scale_lr(lr):
    """The learning rate for size() ranks of the same per-rank batch: lr * ddl.size()."""
    return lr * ddl.size()


def _tensors(params):
    """The tensors of a state_dict, a named_parameters() list or an iterable of tensors."""
    if isinstance(params, dict):
        return list(params.values())
    out = []
    for item in params:
        out.append(item[1] if isinstance(item, tuple) else item)
    return out


def broadcast_parameters(params, root_rank=0):
    """Copies root_rank's tensors into every rank's, in place (model.state_dict(),
    model.named_parameters() or model.parameters())."""
    with torch.no_grad():
        for tensor in _tensors(params):
            if tensor.is_contiguous():
                ddl.broadcast(tensor.data if tensor.requires_grad else tensor, root_rank)
            else:
                copy = tensor.contiguous()
                ddl.broadcast(copy, root_rank)
                tensor.copy_(copy)


def broadcast_object(obj, root_rank=0):
    """root_rank's obj on every rank (serialised with torch.save, so tensors travel too)."""
    buffer = io.BytesIO()
    if ddl.rank() == root_rank:
        torch.save(obj, buffer)
    data = ddl._broadcast_bytes(buffer.getvalue(), root_rank)
    return obj if ddl.rank() == root_rank else torch.load(io.BytesIO(data))


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Gives every rank root_rank's optimizer state (momentum buffers, step counts, learning
    rates), so a run resumed from rank 0's checkpoint continues identically everywhere."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if ddl.rank() != root_rank:
        optimizer.load_state_dict(state)


def allreduce_metric(value, op="avg"):
    """value (a number or a tensor) reduced over every rank: a float for a number, a new
    tensor for a tensor. The mean by default (op: sum, avg, min, max, prod)."""
    if isinstance(value, torch.Tensor):
        out = value.detach().to("cpu").contiguous().clone()
        if out.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            out = out.to(torch.float64)
        return ddl.allreduce(out, op=op)
    cell = numpy.array([float(value)], dtype=numpy.float64)
    ddl.allreduce(cell, op=op)
    return float(cell[0])


class DistributedOptimizer:
    """Wraps a torch.optim optimizer: gradients are averaged over the ranks while the backward
    pass runs (ddl._fusion.GradientReducer: hooks start fused allreduces of ready buckets on
    ddl's worker thread), and step() waits for the rest before the wrapped optimizer's step.

    op="sum" sums instead of averaging; backward_passes_per_step=k accumulates k backward passes
    locally before reducing (step() after the k-th). A parameter without a gradient on a rank
    counts as zeros there. Everything else (zero_grad, param_groups, state_dict, ...) is the
    wrapped optimizer's."""

    def __init__(self, optimizer, named_parameters=None, op="avg", backward_passes_per_step=1):
        self.optimizer = optimizer
        self.op = op
        del named_parameters  # accepted for Horovod's signature; the groups name the parameters
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.reducer = GradientReducer(params, op=op, passes=backward_passes_per_step)

    def __getattr__(self, name):
        return getattr(self.optimizer, name)

    def synchronize(self):
        """Waits until every gradient is averaged (step() does it)."""
        self.reducer.synchronize()

    def step(self, closure=None):
        self.synchronize()
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none=False):
        if self.reducer.pending():  # no reduction may still be writing a .grad
            self.reducer.synchronize()
        return self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        return self.optimizer.load_state_dict(state)


class DistributedSampler(torch.utils.data.Sampler):
    """Rank ddl.rank()'s share of a dataset's indices: every size()-th index of one permutation
    (the same on every rank: seed + epoch), padded by wrapping so each rank gets the same count.
    Call set_epoch(e) before each epoch to reshuffle."""

    def __init__(self, dataset, shuffle=True, seed=0, drop_last=False):
        self.length = dataset if isinstance(dataset, int) else len(dataset)
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        self.rank, self.size = ddl.rank(), ddl.size()
        if drop_last:
            self.per_rank = self.length // self.size
        else:
            self.per_rank = math.ceil(self.length / self.size)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(self.length, generator=generator).tolist()
        else:
            indices = list(range(self.length))
        total = self.per_rank * self.size
        if total > len(indices):
            indices += (indices * math.ceil(total / max(len(indices), 1)))[:total - len(indices)]
        indices = indices[:total]
        return iter(indices[self.rank:total:self.size])

    def __len__(self):
        return self.per_rank


def _create_process_group(options, pg_options=None):
    """init_process_group("ddl") and new_group(backend="ddl")'s creator (torch's extended API):
    the C++ backend ProcessGroupDdl (python/ext/torch/process_group_ddl.h: a c10d::ProcessGroup on torch
    1.x, a c10d::Backend on 2.x) over the job ddl.init() joins, or over a libddl group of
    new_group's ranks (made by every member, in the collectives' order). Under ddlrun (or
    another launcher libddl knows) libddl finds the job from the launcher's variables; under
    torchrun, or with no launcher at all, the ranks meet through the store torch hands the
    backend (_meet_through_store). A timeout other than torch's default becomes libddl's
    DDL_TIMEOUT (start-up and every transfer) when this creates the runtime; once the runtime
    runs, a timeout other than DDL_TIMEOUT is the group's own (_apply_timeout)."""
    del pg_options
    _torch_pg = _binaries.torch_backend(torch.__version__)
    ranks = [int(r) for r in options.global_ranks_in_group]
    own_timeout = _apply_timeout(options.timeout)
    if not ddl.initialized() and _meets_through_store():
        _meet_through_store(options, ranks)
    ddl.init()
    if ranks == list(range(ddl.size())):
        ranks = []  # the job itself: libddl's world group, or every rank with own_timeout
    pg = _torch_pg.ProcessGroupDdl(options.group_rank, options.group_size, ranks, options.store,
                                   own_timeout)
    if _torch_pg.torch_major < 2:
        return pg  # torch 1.x: the backend is the process group, named "ddl"
    return _torch_pg.GroupDdl(options.store, options.group_rank, options.group_size,
                              _debug_wrapper(pg, options))


def _debug_wrapper(backend, options):
    """`backend`, or under TORCH_DISTRIBUTED_DEBUG=DETAIL torch's checking wrapper around it
    (which compares every collective's kind, shapes and sequence number across the ranks
    through a gloo group before running it), as torch wraps its own backends."""
    c10d = torch.distributed.distributed_c10d
    if c10d.get_debug_level() != c10d.DebugLevel.DETAIL or not c10d._GLOO_AVAILABLE:
        return backend
    return c10d._create_process_group_wrapper(
        wrapped_pg=backend, store_prefix=str(options.group_id), store=options.store,
        rank=options.group_rank, world_size=options.group_size, timeout=options.timeout)


# libddl's variables for who a rank is, as its launchers set them: the rows of libddl's table
# (comm/bootstrap/rank_variables.h) that ddl_init() reads, and PMIx's namespace.
_LAUNCHER_RANKS = tuple(ddl._ddl.launcher_variables())


def _meets_through_store():
    """Whether libddl must meet through torch's store: under torchrun (which sets
    TORCHELASTIC_RUN_ID; any SLURM_PROCID it inherits names the agent, not the rank), or where
    no launcher libddl knows started the process, unless DDL_ALLOW_SINGLE asks for a job of one
    rank (then a larger world_size is refused at once instead of waiting for absent ranks)."""
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        return True
    if os.environ.get("DDL_ALLOW_SINGLE"):
        return False
    return not any(os.environ.get(name) for name in _LAUNCHER_RANKS)


def meet_before_store(timeout=None):
    """In a ddlrun rank, before init_process_group("ddl") makes torch's store: libddl's ranks
    meet (ddl.init(), with `timeout`, a timedelta, as DDL_TIMEOUT unless it is torch's
    default). torch's store only counts the ranks that came ("1/2 clients joined"); libddl's
    rendezvous names those that did not, with their hosts. Under torchrun, or outside any
    launcher, the ranks meet through that store instead (_meet_through_store): nothing here."""
    if ddl.initialized() or _meets_through_store():
        return
    if timeout is not None:
        _apply_timeout(timeout)
    ddl.init()


# Rank 0's rendezvous server under torchrun: kept for the life of the process.
_servers = []


def _meet_through_store(options, ranks):
    """How ranks that no ddlrun started meet: rank 0 starts libddl's rendezvous server
    (ddlrun's own, comm/bootstrap) and puts its address and a fresh token in torch's store;
    every rank reads them and gives them to libddl as ddlrun would (DDL_RANK, DDL_SIZE,
    DDL_RENDEZVOUS, DDL_JOB_TOKEN), so ddl.init() runs as in a ddlrun job. Only for a group of
    every rank: libddl's job is the whole world."""
    import secrets

    world = torch.distributed.get_world_size() if ranks else options.group_size
    if ranks and ranks != list(range(world)):
        raise RuntimeError(
            f"ddl backend: new_group(ranks={ranks}, backend='ddl') is the first ddl group, "
            "outside ddlrun: libddl's ranks meet once, as the whole job; make the default group "
            "with backend 'ddl' (init_process_group('ddl')), or a ddl group of every rank first")
    rank = options.group_rank if not ranks else torch.distributed.get_rank()
    store = options.store
    if rank == 0:
        token = secrets.token_hex(16)
        server = ddl._ddl.RendezvousServer(token, world)
        _servers.append(server)
        store.set("ddl/rendezvous", f"{_reachable_address()}:{server.port} {token}")
    address, token = store.get("ddl/rendezvous").decode().split()
    os.environ.update(DDL_RANK=str(rank), DDL_SIZE=str(world), DDL_RENDEZVOUS=address,
                      DDL_JOB_TOKEN=token)
    os.environ.setdefault("DDL_JOB_ID", job_id_of(token))


def job_id_of(token):
    """The job id (which names the job's shared-memory segments, listed in /dev/shm for every
    user of the host) derived from the token without giving away any of it: a hash's prefix,
    not the token's own."""
    import hashlib

    return "torch-" + hashlib.sha256(("ddl job id " + token).encode()).hexdigest()[:12]


def _reachable_address():
    """This host's address as the other ranks reach it: $DDL_RENDEZVOUS_HOST when set, else the
    local address of the route to torch's store ($MASTER_ADDR, which every rank reaches), else
    the host name."""
    import socket

    if os.environ.get("DDL_RENDEZVOUS_HOST"):
        return os.environ["DDL_RENDEZVOUS_HOST"]
    master = os.environ.get("MASTER_ADDR")
    if master:
        try:
            family = socket.getaddrinfo(master, None)[0][0]
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((master, 9))
                host = s.getsockname()[0]
            return f"[{host}]" if ":" in host else host
        except OSError:
            pass
    return socket.gethostname()


def _apply_timeout(timeout):
    """The seconds a new group's collectives get as their own timeout (0: libddl's DDL_TIMEOUT)
    for the group's `timeout` (a timedelta): torch's default changes nothing; before libddl
    starts, a timeout becomes DDL_TIMEOUT (start-up and every transfer of the job); once it
    runs, a timeout other than DDL_TIMEOUT is the group's own (ddl_group_set_timeout)."""
    from torch.distributed.constants import default_pg_timeout

    seconds = timeout.total_seconds()
    if timeout == default_pg_timeout:
        return 0.0
    if not ddl.initialized():
        os.environ["DDL_TIMEOUT"] = f"{seconds:g}"
        return 0.0
    if os.environ.get("DDL_TIMEOUT", "60") == f"{seconds:g}":
        return 0.0
    return seconds


def _monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for ddl groups too (torch's own takes gloo's only):
    the group's own monitored_barrier (ProcessGroupDdl::monitoredBarrier, python/
    monitored_barrier.cc: through the group's store, with torch's texts, "Rank 1 failed to pass
    monitoredBarrier in 2000 ms"); `timeout` a timedelta or seconds, the group's (DDL_TIMEOUT)
    when None. Any other group goes to torch's."""
    import datetime

    dist = torch.distributed
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if dist.get_backend(pg) != "ddl":
        return _torch_monitored_barrier(group=group, timeout=timeout,
                                        wait_all_ranks=wait_all_ranks)
    if timeout is None:
        return pg.monitored_barrier(wait_all_ranks=wait_all_ranks)
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=timeout)
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


_torch_monitored_barrier = None


def _register_backend():
    """Makes init_process_group("ddl") create ProcessGroupDdl, where torch has distributed
    (ddl/_site/sitecustomize.py does the same in ddlrun's ranks), and monitored_barrier take
    ddl groups."""
    global _torch_monitored_barrier
    dist = torch.distributed
    if not dist.is_available():
        return
    if not hasattr(dist.Backend, "DDL"):
        register_backend(dist, _create_process_group)
    if _torch_monitored_barrier is None:
        _torch_monitored_barrier = dist.monitored_barrier
        dist.monitored_barrier = _monitored_barrier


_register_backend()
