"""ddl: libddl's collectives for Python, on numpy arrays and torch CPU tensors.

How it works: each call checks its arrays (C-contiguous, one supported dtype, writable where it is
written, the right sizes), takes their data pointers and calls libddl through the extension
``ddl._ddl`` with the GIL released, so nothing is copied: ``allreduce(x)`` works on ``x`` in
place, ``allreduce(x, out=y)`` writes ``y``. The first call of anything initialises the runtime
(``init()``), which finds the job from the launcher's variables; a script not started by ddlrun
(or mpirun, srun, ...) gets ``ddl.Error`` with the runtime's message, unless DDL_ALLOW_SINGLE=1
makes it a job of one rank. Every rank must make the same calls in the same order with the same
sizes, as with the C API (libddl(3)): when they do not, the call raises ``ddl.MismatchError`` (a
``ddl.Error``, status ``ERR_MISMATCH``) on every rank, naming two ranks and their calls, and so
does every later one. Collectives queued on ddl's worker thread (the asynchronous calls of
ddl.torch and horovod.torch) run first: a direct call waits for them (ddl._worker).

    import numpy as np, ddl
    grad = np.ones(1000, dtype=np.float32)
    ddl.allreduce(grad, op="avg")        # in place, on every rank
    print(ddl.rank(), ddl.size(), grad[0])
"""

import itertools
import math
import sys

from . import _ddl, _worker
from ._ddl import ERR_MISMATCH, Error, MismatchError

__all__ = [
    "Error", "MismatchError", "ERR_MISMATCH", "init", "finalize", "initialized", "rank", "size",
    "local_rank", "local_size", "local_gpuid", "allreduce", "allreduce_n", "broadcast",
    "allgather", "reduce_scatter", "barrier", "allgatherv", "alltoall", "alltoallv", "send",
    "recv", "new_group", "Group", "DDLCallback", "DDLGlobalVariablesCallback", "shared_zeros",
]

# ddl_datatype_t (names by value) and ddl_op_t (ddl/ddl.h); torch.uint16 exists from torch 2.3 on.
_TYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "int8", "int16",
          "uint16", "bool")
_NUMPY_TYPES = {"f4": 0, "f8": 1, "f2": 2, "i4": 4, "i8": 5, "u1": 6, "i1": 7, "i2": 8, "u2": 9,
                "b1": 10}
_NUMPY_NAMES = ", ".join(t for t in _TYPES if t != "bfloat16")
_TORCH_TYPES = {f"torch.{t}": code for code, t in enumerate(_TYPES)}
_OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4, "band": 5, "bor": 6, "bxor": 7}


def init(*ibm_args, **ibm_kwargs):
    """Joins the job (ddl_init); does nothing when already initialised.

    Given IBM's TensorFlow arguments (user_gpuid, mode=, pci=), it is IBM's `init` op as well:
    it returns (rank, size, local_rank, local_size, local_gpuid) as TensorFlow tensors
    (ddl.tensorflow.ibm_init).

    Also makes an uncaught KeyboardInterrupt (Ctrl-C, which ddlrun passes to every rank) end
    the rank with one line, "rank R: interrupted (KeyboardInterrupt)", instead of a traceback
    from every rank, unless the program set its own sys.excepthook. The rank then ends at once
    by SIGINT (status 130 under ddlrun), without atexit handlers or the interpreter's shutdown:
    those may wait for a collective that the interrupted peers will never join (ddl's worker
    thread, torch's process groups), until DDL_TIMEOUT. ``except KeyboardInterrupt`` and
    ``finally`` work as always.
    """
    if not _ddl.initialized():
        _ddl.init()
        if sys.excepthook is sys.__excepthook__:
            sys.excepthook = _one_line_interrupt(_ddl.rank(), sys.excepthook)
    if ibm_args or ibm_kwargs:
        from . import tensorflow as ddl_tf  # noqa: PLC0415 (IBM's op: TensorFlow's tensors)

        return ddl_tf.ibm_init(*ibm_args, **ibm_kwargs)
    return None


def _one_line_interrupt(rank, previous):
    """An excepthook that reports an uncaught KeyboardInterrupt in one line."""

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            _end_by_sigint(f"rank {rank}: interrupted (KeyboardInterrupt)\n")
        previous(kind, value, tb)

    return hook


def _end_by_sigint(line):
    """Says `line` on the process's standard error and ends this process now by SIGINT, as
    Python itself ends after an uncaught KeyboardInterrupt, but before atexit and the
    interpreter's shutdown. What Python buffered is flushed first; the line goes to descriptor
    2 itself, since a hook around this one (torch.distributed's, which prefixes "[rankN]: ")
    may hold sys.stderr in a buffer that it would write only after this returns."""
    import os
    import signal

    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        os.write(2, line.encode())
    except OSError:
        pass  # stderr closed: nothing to say it on
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(130)  # (only if SIGINT could not end it)


def finalize():
    """Leaves the job (ddl_finalize); init() may be called again afterwards."""
    if _ddl.initialized():
        _worker.drain()
        _ddl.finalize()


def initialized():
    """True between init() and finalize()."""
    return _ddl.initialized()


def _joined(query, name, doc):
    """A module function ``name`` that joins the job first (init()), then answers query()."""

    def answer():
        init()
        return query()

    answer.__name__ = answer.__qualname__ = name
    answer.__doc__ = doc
    return answer


rank = _joined(lambda: _ddl.rank(), "rank", "This process's rank, 0..size()-1.")
size = _joined(lambda: _ddl.size(), "size", "The number of ranks in the job.")
local_rank = _joined(lambda: _ddl.local_rank(), "local_rank",
                     "This rank among the ranks on its host.")
local_size = _joined(lambda: _ddl.local_size(), "local_size", "The number of ranks on this host.")
local_gpuid = _joined(lambda: _ddl.local_gpu(), "local_gpuid",
                      "The CUDA index (on this host) the mapper gave this rank, -1 for none.")


class _View:
    """One array or tensor as libddl sees it: address, element count, ddl type."""

    __slots__ = ("obj", "address", "count", "type", "is_torch")

    def __init__(self, obj, what, writable):
        if _is_torch(obj):
            if obj.device.type != "cpu":
                raise TypeError(f"{what}: a {obj.device.type} tensor; ddl takes CPU tensors")
            if not obj.is_contiguous():
                raise ValueError(f"{what}: the tensor is not contiguous (use .contiguous())")
            key = str(obj.dtype)
            if key not in _TORCH_TYPES:
                raise TypeError(f"{what}: dtype {key} is not one of {', '.join(_TORCH_TYPES)}")
            self.address, self.count, self.type = obj.data_ptr(), obj.numel(), _TORCH_TYPES[key]
            self.is_torch = True
        else:
            import numpy

            if not isinstance(obj, numpy.ndarray):
                raise TypeError(f"{what}: a {type(obj).__name__}; ddl takes numpy arrays and "
                                "torch tensors")
            if not obj.flags.c_contiguous:
                raise ValueError(f"{what}: the array is not C-contiguous "
                                 "(use numpy.ascontiguousarray)")
            if writable and not obj.flags.writeable:
                raise ValueError(f"{what}: the array is read-only")
            key = obj.dtype.str[1:]
            if key not in _NUMPY_TYPES:
                raise TypeError(f"{what}: dtype {obj.dtype} is not one of {_NUMPY_NAMES}")
            self.address = obj.__array_interface__["data"][0]
            self.count, self.type = obj.size, _NUMPY_TYPES[key]
            self.is_torch = False
        self.obj = obj


def _prepared(x, what, writable):
    """x as libddl sees it (_View), once this rank has joined the job (init()) and the calls
    queued on ddl's worker thread have run (ddl._worker)."""
    init()
    _worker.drain()
    return _View(x, what, writable)


def _is_tf(obj):
    """True for a TensorFlow tensor or variable, or a Keras variable (tested by type name:
    TensorFlow is imported only for them)."""
    return type(obj).__module__.partition(".")[0] in ("tensorflow", "keras")


def _tf():
    """ddl.tensorflow, for a call on TensorFlow tensors."""
    from . import tensorflow

    return tensorflow


# The Keras callbacks of IBM's recipe (ddl/keras.py) and the TensorFlow and Keras modules,
# imported when first used, so `import ddl` alone never imports TensorFlow.
_LAZY = {"DDLCallback": "keras", "DDLGlobalVariablesCallback": "keras", "tensorflow": None,
         "keras": None, "bcast": "tensorflow", "all_reduce_n": "tensorflow"}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'ddl' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(f"{__name__}.{_LAZY[name] or name}")
    except ModuleNotFoundError as e:
        if e.name not in ("tensorflow", "keras"):
            raise
        import sys

        raise ModuleNotFoundError(
            f"ddl.{name} needs TensorFlow and Keras, and this Python ({sys.executable}) has no "
            f"{e.name}: pip install tensorflow (or tensorflow-cpu) into its environment, or run "
            "the job with the Python that has them", name=e.name) from None
    return module if _LAZY[name] is None else getattr(module, name)


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _op(op):
    try:
        return _OPS[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}: one of {', '.join(_OPS)}") from None


def _empty_like(view, shape):
    """A new array (or tensor) of `view`'s kind and dtype."""
    if view.is_torch:
        import torch

        return torch.empty(shape, dtype=view.obj.dtype)
    import numpy

    return numpy.empty(shape, dtype=view.obj.dtype)


def shared_zeros(shape, dtype="float32"):
    """A zeroed numpy array (dtype a numpy dtype or its name) or torch CPU tensor (dtype a
    torch.dtype) of `shape` in memory the other ranks of this host can map (ddl_alloc).

    An in-place allreduce on such buffers, when every rank of the host passes one, takes
    libddl's single pass: each rank reduces its share straight from the others' buffers and
    writes the result into all of them, with no copy through libddl's own shared memory. The
    memory is freed when the last array or tensor over it is gone. Needs no ddl.init()."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = math.prod(shape)
    if type(dtype).__module__.startswith("torch"):
        import torch

        itemsize = torch.empty((), dtype=dtype).element_size()
        block = _ddl.SharedBlock(max(1, count * itemsize))
        return torch.frombuffer(block, dtype=dtype, count=count).reshape(shape) if count else \
            torch.zeros(shape, dtype=dtype)
    import numpy

    dtype = numpy.dtype(dtype)
    block = _ddl.SharedBlock(max(1, count * dtype.itemsize))
    return numpy.frombuffer(block, dtype=dtype, count=count).reshape(shape)


def _handle(group):
    """The extension's handle of `group` (0: the whole job)."""
    if group is None:
        return 0
    if not isinstance(group, Group):
        raise TypeError(f"group: a {type(group).__name__}; pass a ddl.Group (from new_group) "
                        "or None for the whole job")
    return group._live_handle()


def _size(group):
    return _ddl.size() if group is None else group.size()


def allreduce(x, op="sum", out=None, group=None):
    """Reduces x over every rank (of `group`: a ddl.Group) with op (sum, avg, min, max, prod;
    the bitwise band, bor, bxor on integer and bool dtypes).

    Integers wrap; avg truncates their wrapped sum toward zero. On bool, sum and max are a
    logical or, prod and min a logical and; avg of bool is refused (ddl.Error). In place (returns x) unless out is given: then x is only read and out (same dtype and
    number of elements) receives the result and is returned. A TensorFlow tensor gives a new
    tensor (a variable is assigned the result): ddl.tensorflow.allreduce."""
    if _is_tf(x):
        return _tf().allreduce(x, op, group=group)
    send = _prepared(x, "allreduce", writable=out is None)
    recv = send if out is None else _View(out, "allreduce: out", writable=True)
    if recv.type != send.type or recv.count != send.count:
        raise ValueError("allreduce: out must have x's dtype and number of elements")
    if send.count:
        _ddl.group_allreduce(_handle(group), send.address, recv.address, send.count, send.type,
                             _op(op))
    return recv.obj


def allreduce_n(tensors, op="sum", group=None):
    """Reduces every array or tensor of the list in place, fused into large buckets.

    Mixed dtypes are reduced one dtype at a time, in ddl type order. Returns the list (of new
    tensors for TensorFlow tensors: ddl.tensorflow.allreduce_n)."""
    if tensors and _is_tf(tensors[0]):
        return _tf().allreduce_n(tensors, op, group=group)
    init()
    _worker.drain()
    views = [_View(t, f"allreduce_n: item {i}", writable=True) for i, t in enumerate(tensors)]
    code = _op(op)
    for type_code in sorted({v.type for v in views}):
        same = [v for v in views if v.type == type_code and v.count]
        if same:
            _ddl.group_allreduce_n(_handle(group), [v.address for v in same],
                                   [v.count for v in same], type_code, code)
    return tensors


def broadcast(x, root=0, group=None):
    """Copies root's x into every rank's x (in place); returns x. root is a group rank.
    A TensorFlow tensor gives a new tensor (a variable is assigned it)."""
    if _is_tf(x):
        return _tf().broadcast(x, root, group=group)
    view = _prepared(x, "broadcast", writable=True)
    if view.count:
        _ddl.group_bcast(_handle(group), view.address, view.count, view.type, root)
    return x


def _broadcast_bytes(data, root, group=None):
    """Rank root's (a group rank with `group`) bytes `data` on every rank of the job or group
    (`data` is not read elsewhere): one broadcast of their length, one of the bytes (ddl.torch's
    and horovod.tensorflow's broadcast_object)."""
    import numpy

    mine = (rank() if group is None else group.rank()) == root
    length = broadcast(numpy.array([len(data) if mine else 0], dtype=numpy.int64), root, group)
    buffer = numpy.frombuffer(data, dtype=numpy.uint8).copy() if mine else \
        numpy.empty(int(length[0]), dtype=numpy.uint8)
    return broadcast(buffer, root, group).tobytes()


def allgather(x, group=None):
    """A new array holding every rank's x by rank, stacked on the first axis.

    Shape (size * n, ...) for x of shape (n, ...); (size,) for a scalar array. TensorFlow
    tensors may differ in their first dimension (as allgatherv)."""
    if _is_tf(x):
        return _tf().allgather(x, group=group)
    send = _prepared(x, "allgather", writable=False)
    n = _size(group)
    shape = tuple(x.shape)
    out = _empty_like(send, (n * shape[0],) + shape[1:] if shape else (n,))
    if send.count:
        _ddl.allgather(send.address, _View(out, "allgather", True).address, send.count,
                       send.type, _handle(group))
    return out


def allgatherv(x, group=None):
    """allgather for arrays whose first axis differs between ranks (Horovod's allgather): a
    new array of every rank's x concatenated on the first axis, by rank. The other axes and
    the dtype must be the same everywhere."""
    if _is_tf(x):
        return _tf().allgather(x, group=group)
    send = _prepared(x, "allgatherv", writable=False)
    shape = tuple(x.shape) or (1,)
    import numpy

    rows = allgather(numpy.array([shape[0]], dtype=numpy.int64), group=group)
    per_row = math.prod(shape[1:])
    counts = [int(r) * per_row for r in rows]
    out = _empty_like(send, (sum(int(r) for r in rows),) + shape[1:])
    _ddl.allgatherv(send.address, send.count, _View(out, "allgatherv", True).address, counts,
                    _offsets(counts), send.type, _handle(group))
    return out


def _share_shape(x, count, n, what):
    """The shape of 1/n of x: its first axis divided when it divides, else flat."""
    if count % n:
        raise ValueError(f"{what}: {count} elements do not divide among {n} ranks")
    shape = tuple(x.shape)
    if shape and shape[0] % n == 0:
        return (shape[0] // n,) + shape[1:]
    return (count // n,)


def reduce_scatter(x, op="sum", group=None):
    """This rank's share of op over every rank's x, as a new array.

    x's element count must divide by the number of ranks; rank r gets chunk r. Shape
    (n / size, ...) when x's first axis n divides by it, else flat."""
    send = _prepared(x, "reduce_scatter", writable=False)
    n = _size(group)
    out = _empty_like(send, _share_shape(x, send.count, n, "reduce_scatter"))
    if send.count:
        _ddl.group_reduce_scatter(_handle(group), send.address,
                                  _View(out, "reduce_scatter", True).address, send.count // n,
                                  send.type, _op(op))
    return out


def barrier(group=None):
    """Returns once every rank (of `group`) has entered."""
    init()
    _worker.drain()
    _ddl.group_barrier(_handle(group))


def alltoall(x, group=None):
    """A new array of x's shape: block j of x (its first axis cut in `size` equal blocks, or
    the flat elements when it does not divide) goes to rank j, and block j of the result
    comes from rank j. A TensorFlow tensor: its first axis cut in equal blocks."""
    if _is_tf(x):
        return _tf().alltoall(x, group=group)
    send = _prepared(x, "alltoall", writable=False)
    n = _size(group)
    _share_shape(x, send.count, n, "alltoall")
    out = _empty_like(send, tuple(x.shape))
    if send.count:
        _ddl.alltoall(send.address, _View(out, "alltoall", True).address, send.count // n,
                      send.type, _handle(group))
    return out


def alltoallv(x, send_counts, recv_counts, group=None):
    """Rank r sends send_counts[j] elements of x (flat, in rank order) to rank j and gets
    recv_counts[j] from it; returns the received elements, flat, in rank order. Rank r's
    send_counts[j] must equal rank j's recv_counts[r] (else every rank raises MismatchError)."""
    send = _prepared(x, "alltoallv", writable=False)
    if sum(send_counts) != send.count:
        raise ValueError(f"alltoallv: send_counts add up to {sum(send_counts)}, x holds "
                         f"{send.count} elements")
    out = _empty_like(send, (sum(recv_counts),))
    _ddl.alltoallv(send.address, list(send_counts), _offsets(send_counts),
                   _View(out, "alltoallv", True).address, list(recv_counts),
                   _offsets(recv_counts), send.type, _handle(group))
    return out


def _offsets(counts):
    """Where each of `counts` consecutive blocks starts."""
    return list(itertools.accumulate(counts, initial=0))[:-1]


def send(x, peer, tag=0, group=None):
    """Sends x to rank `peer` (a group rank with `group`) under `tag`; returns once x may be
    reused. The receiver passes the same tag, dtype and number of elements."""
    view = _prepared(x, "send", writable=False)
    _ddl.send(view.address, view.count, view.type, peer, tag, _handle(group))


def recv(x, peer, tag=0, group=None):
    """Receives into x (in place; returns x) the message from rank `peer` under `tag`, which
    must have x's dtype and number of elements (else ddl.MismatchError, naming the sender)."""
    view = _prepared(x, "recv", writable=True)
    _ddl.recv(view.address, view.count, view.type, peer, tag, _handle(group))
    return x


def new_group(ranks):
    """A Group of `ranks` (job ranks, in group-rank order), or None on ranks outside it.

    Members make their groups with the same lists in the same order; other ranks may call it
    too (as torch.distributed.new_group is called by every rank) and get None. Nothing is sent:
    members whose lists differ fail the group's first call with MismatchError."""
    init()
    handle = _ddl.group_create([int(r) for r in ranks])
    return None if handle is None else Group(handle, list(ranks))


def _on_group(function):
    """A Group method: `function` (a module collective or message) on the group's members."""

    def method(self, *args, **kwargs):
        return function(*args, group=self, **kwargs)

    method.__name__ = method.__qualname__ = function.__name__
    method.__doc__ = function.__doc__
    return method


class Group:
    """Some of the job's ranks (new_group): the module's collectives and messages on its
    members only, with group ranks for roots and peers. destroy() (or finalize()) frees it."""

    def __init__(self, handle, ranks):
        self._handle = handle
        self.ranks = ranks

    def _live_handle(self):
        if self._handle is None:
            raise ValueError("the group was destroyed")
        return self._handle

    def rank(self):
        """This rank's index in the group."""
        return _ddl.group_rank(self._live_handle())

    def size(self):
        """The number of members."""
        return len(self.ranks)

    def destroy(self):
        """Frees the group (no communication); it cannot be used afterwards."""
        if self._handle is not None and _ddl.initialized():
            _ddl.group_destroy(self._handle)
        self._handle = None


for _call in (allreduce, allreduce_n, broadcast, allgather, allgatherv, reduce_scatter, barrier,
              alltoall, alltoallv, send, recv):
    setattr(Group, _call.__name__, _on_group(_call))


def _imported_by_a_script():
    """True when the module importing ddl now is the user's, not ddl's own Horovod package."""
    frame = sys._getframe(2)  # above this function and ddl's own module code
    while frame is not None and "importlib" in frame.f_code.co_filename:
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name.split(".")[0] not in ("ddl", "horovod")


# IBM's `import ddl` makes a TensorFlow script data-parallel (ddl/_autowrap.py).
from . import _autowrap  # noqa: E402

if _autowrap.wanted() and _imported_by_a_script():
    _autowrap.install()
