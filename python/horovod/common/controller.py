"""Horovod's collectives matched by name across ranks and checked before their data moves, with
Horovod's join() for uneven data, on ddl._negotiate.

How it works: run(kind, name, fn, sig, group) names the call as Horovod does ("allreduce.<name>",
or "allreduce.noname.<N>" for this rank's N-th unnamed allreduce in that group) and submits fn
to ddl._negotiate with sig, the tuple every member's call of that name must agree on (dtype,
shape, op, root, ...). fn runs on ddl's worker thread once every member of the group has called
a collective of that name, in an order all members agree on; when their sigs differ fn runs
nowhere and every member's wait() raises CallMismatch, the communicator untouched. A name
started and not yet synchronized on this rank raises ValueError at once (as Horovod's, whose
calls stay in flight until its controller has run them). The synchronous calls are run() then
wait() (with now=True: on the calling thread where ddl offers _negotiate.submit_now).

join() is the negotiator's: until every rank has joined, a joined rank takes part in the
allreduces the others make (signatures of kind "allreduce": [(dtype, shape), ...] and the op)
through stand_in(), which makes the same ddl.allreduce_n with zeros; any other call fails on
every rank. Unnamed-call counters restart when a join ends, as the joined ranks made fewer calls.

When the negotiator fails every rank's calls with NameMismatch (every rank waits, no name in
common: the ranks' programs diverged, e.g. one left a test early after an assertion while the
others went on), the waiting thread recovers (_recover): one allgather of every rank's failed
calls by kind; a rank waiting at a barrier while others wait for something else keeps waiting,
as the others, having failed, come next (a barrier carries no data, so every barrier is named
alike); everything else raises the NameMismatch.
"""

import pickle
import threading

import numpy as np

import ddl
from ddl import _negotiate

from . import timeline

__all__ = ["Handle", "run", "join", "reset", "stand_in", "gather_objects"]


class Handle:
    """One collective in flight: done() and wait() (its result, or what it raised)."""

    __slots__ = ("kind", "name", "fn", "sig", "group", "call", "error")

    def __init__(self, kind, name, fn, sig, group, now=False):
        self.kind, self.name, self.fn, self.sig = kind, name, fn, sig
        self.group, self.error = group, None
        if (id(group), name) in _live:
            raise ValueError(f"hvd.{kind}: a collective named {name!r} was started and not "
                             "synchronized yet on this rank: names of calls in flight must be "
                             "unique (synchronize the first, or give another name=)")
        submit = _submit_now if now else _negotiate.submit
        self.call = submit(name, fn, sig, group)
        _live[(id(group), name)] = self

    def done(self):
        return self.error is not None or self.call.done()

    def wait(self):
        while True:
            try:
                result = self.call.wait()
            except _negotiate.NameMismatch as e:
                if self.group is not None:
                    _live.pop((id(self.group), self.name), None)
                    raise
                _recover(e)
                if self.error is None:
                    continue
                _live.pop((id(self.group), self.name), None)
                raise self.error from None
            except BaseException:
                _live.pop((id(self.group), self.name), None)
                raise
            _live.pop((id(self.group), self.name), None)
            return result

    def resubmit(self):
        self.call = _negotiate.submit(self.name, self.fn, self.sig, self.group)


_submit_now = getattr(_negotiate, "submit_now", _negotiate.submit)  # where the ddl has it
_live = {}  # (id(group), name) -> Handle not waited for yet
_unnamed = {}  # (kind, group id) -> unnamed calls so far
_lock = threading.RLock()  # one recovery at a time
_recovered = []  # NameMismatch errors already recovered from (most recent last)
_recoveries = [0]  # recoveries so far (the same on every rank: each is collective)
_epoch = [0]  # shutdowns so far: calls left in flight by an earlier init never pair with later


def call_name(kind, name, group):
    """Horovod's name of a call: "<kind>.<name>", or "<kind>.noname.<N>" when unnamed; after
    the E-th shutdown() and init(), "#E" follows."""
    if name is None:
        key = (kind, id(group))
        _unnamed[key] = _unnamed.get(key, -1) + 1
        name = f"noname.{_unnamed[key]}"
    return f"{kind}.{name}" + (f"#{_epoch[0]}" if _epoch[0] else "")


def run(kind, name, fn, sig, group=None, now=False):
    """Submits fn as the collective `kind` named `name` (None: unnamed) in `group` (a ddl.Group,
    None for the job); a Handle. now=True: the caller waits at once, so the negotiation may
    run on its thread (_negotiate.submit_now)."""
    name = call_name(kind, name, group)
    return Handle(kind, name, timeline.wrap(kind, name, fn), sig, group, now)


def reset():
    """Forgets the calls in flight and the counters (hvd.shutdown()); the names of later calls
    differ from those of the calls left in flight."""
    _epoch[0] += 1
    _live.clear()
    _unnamed.clear()
    _recovered.clear()


def join(group=None):
    """Waits until every rank has joined, taking part in the others' allreduces meanwhile;
    the rank that joined last (the same on every rank)."""
    last = _negotiate.join(stand_in, group).wait()
    _unnamed.clear()
    return int(last)


def stand_in(sig):
    """A joined rank's part in the allreduce of signature sig (("allreduce", [(dtype, shape),
    ...], op, ...)): the same ddl.allreduce_n, on zeros of those dtypes and shapes."""
    specs, op = sig[1], sig[2]

    def contribute():
        ddl.allreduce_n([_zeros(dtype, shape) for dtype, shape in specs], op=op)

    return contribute


def _failed_with(handle, error):
    if not handle.call.done():
        return False
    try:
        handle.call.wait()
    except _negotiate.NameMismatch as e:
        return e is error
    except BaseException:  # noqa: BLE001 (failed otherwise: its own waiter hears it)
        return False
    return False


def gather_objects(obj, group=None):
    """Every rank's (of `group`, a ddl.Group) picklable obj, by rank (one allgather of sizes,
    one of the bytes)."""
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = ddl.allgather(np.array([data.size], dtype=np.int64), group=group).tolist()
    padded = np.zeros(max(sizes), dtype=np.uint8)
    padded[:data.size] = data
    rows = ddl.allgather(padded[np.newaxis], group=group).reshape(len(sizes), -1)
    return [pickle.loads(rows[r, :n].tobytes()) for r, n in enumerate(sizes)]


def _recover(error):
    """After NameMismatch on the whole job: a rank waiting at a barrier while others wait for
    something else keeps waiting; every other call fails with `error`."""
    with _lock:
        if any(e is error for e in _recovered):
            return
        _recovered.append(error)
        del _recovered[:-8]
        failed = [h for h in list(_live.values()) if h.group is None and _failed_with(h, error)]
        name = f"hvd.recover.{_recoveries[0]}"
        _recoveries[0] += 1
        try:
            everyone = _negotiate.submit(name, lambda: gather_objects(
                [h.kind for h in failed])).wait()
        except RuntimeError:  # some rank is not recovering: the first failure is the one to see
            everyone = []
        others = {kind for kinds in everyone for kind in kinds} - {"barrier"}
        for h in failed:
            if h.kind == "barrier" and others:
                h.resubmit()
            else:
                h.error = error


def _zeros(dtype, shape):
    if dtype == "bfloat16":
        import torch  # noqa: PLC0415 (only numpy's dtypes otherwise)

        return torch.zeros(shape, dtype=torch.bfloat16)
    return np.zeros(shape, dtype=np.dtype(dtype))
