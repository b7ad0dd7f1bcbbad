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
wait().

join(): a joined rank takes part in the allreduces the other ranks still make, adding zeros,
until every rank has joined; it returns the rank that joined last. The negotiator knows nothing
of joins: a joined rank waits for the call "join.<N>", which the others have not made, while
they wait for theirs, so the negotiator finds every member waiting with no name in common and
fails every pending call with NameMismatch. On every rank the waiting thread then recovers
(_recover): one allgather of every rank's failed calls, described (name, sig, whether it is a
join, and for an allreduce the dtypes and shapes of what it sends); the calls every rank that
has not joined made are the ones to run: a joined rank submits a stand-in of each allreduce
among them (zeros of those dtypes and shapes under the same name and sig), the others submit
their calls again, and calls that cannot run with a joined rank (allgather, broadcast, ...)
raise on the ranks that made them. With no rank joined, or nothing in common, the failure is
real and NameMismatch is raised, except on ranks waiting at a barrier (or a join) while others
wait for something else: those keep waiting, as the others, having failed, come next (a
barrier carries no data, so every barrier is named alike). Unnamed-call counters restart when a
join ends, as the joined ranks made fewer calls.
"""

import pickle
import threading
import time

import numpy as np

import ddl
from ddl import _negotiate

from . import timeline

__all__ = ["Handle", "run", "join", "reset", "JoinedError"]


class JoinedError(RuntimeError):
    """A collective that cannot run while some rank has joined (hvd.join())."""


class Handle:
    """One collective in flight: done() and wait() (its result, or what it raised)."""

    __slots__ = ("kind", "name", "fn", "sig", "group", "standin", "call", "error")

    def __init__(self, kind, name, fn, sig, group, standin, now=False):
        self.kind, self.name, self.fn, self.sig = kind, name, fn, sig
        self.group, self.standin, self.error = group, standin, None
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

    def describe(self):
        return {"name": self.name, "kind": self.kind, "sig": self.sig, "standin": self.standin}

    def resubmit(self):
        self.call = _negotiate.submit(self.name, self.fn, self.sig, self.group)


_submit_now = getattr(_negotiate, "submit_now", _negotiate.submit)  # where the ddl has it
_live = {}  # (id(group), name) -> Handle not waited for yet
_unnamed = {}  # (kind, group id) -> unnamed calls so far
_lock = threading.RLock()  # one recovery at a time
_recovered = []  # NameMismatch errors already recovered from (most recent last)
_joins = {"count": 0, "recoveries": 0}
_epoch = [0]  # shutdowns so far: calls left in flight by an earlier init never pair with later


def call_name(kind, name, group):
    """Horovod's name of a call: "<kind>.<name>", or "<kind>.noname.<N>" when unnamed; after
    the E-th shutdown() and init(), "#E" follows."""
    if name is None:
        key = (kind, id(group))
        _unnamed[key] = _unnamed.get(key, -1) + 1
        name = f"noname.{_unnamed[key]}"
    return f"{kind}.{name}" + (f"#{_epoch[0]}" if _epoch[0] else "")


def run(kind, name, fn, sig, group=None, standin=None, now=False):
    """Submits fn as the collective `kind` named `name` (None: unnamed) in `group` (a ddl.Group,
    None for the job); a Handle. `standin`, for allreduces: [(dtype, shape), ...] and the op of
    the ddl.allreduce_n fn makes, which a joined rank matches with zeros. now=True: the caller
    waits at once, so the negotiation may run on its thread (_negotiate.submit_now)."""
    name = call_name(kind, name, group)
    return Handle(kind, name, timeline.wrap(kind, name, fn), sig, group, standin, now)


def reset():
    """Forgets the calls in flight and the counters (hvd.shutdown()); the names of later calls
    differ from those of the calls left in flight."""
    _epoch[0] += 1
    _live.clear()
    _unnamed.clear()
    _recovered.clear()


def join():
    """Waits until every rank has joined, taking part in the others' allreduces meanwhile;
    the rank that joined last (the same on every rank)."""
    mark = np.array([[_joins["recoveries"], time.time(), ddl.rank()]], dtype=np.float64)
    name = f"join.{_joins['count']}"
    handle = Handle("join", name, lambda: ddl.allgather(mark), ("join",), None, None)
    everyone = handle.wait()
    _joins["count"] += 1
    _unnamed.clear()
    order = sorted(range(len(everyone)), key=lambda r: tuple(everyone[r]))
    return int(order[-1])


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


def _gather_objects(obj):
    """Every rank's picklable obj, by rank (one allgather of sizes, one of the bytes)."""
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = ddl.allgather(np.array([data.size], dtype=np.int64)).tolist()
    padded = np.zeros(max(sizes), dtype=np.uint8)
    padded[:data.size] = data
    rows = ddl.allgather(padded[np.newaxis]).reshape(len(sizes), -1)
    return [pickle.loads(rows[r, :n].tobytes()) for r, n in enumerate(sizes)]


def _recover(error):
    """After NameMismatch on the whole job: runs what the ranks that have not joined all called
    (see the module's text), or fails the calls with `error` when no rank has joined."""
    with _lock:
        if any(e is error for e in _recovered):
            return
        _recovered.append(error)
        del _recovered[:-8]
        failed = [h for h in list(_live.values()) if h.group is None and _failed_with(h, error)]
        name = f"hvd.recover.{_joins['recoveries']}"
        _joins["recoveries"] += 1
        try:
            everyone = _negotiate.submit(name, lambda: _gather_objects(
                [h.describe() for h in failed])).wait()
        except RuntimeError:  # some rank is not recovering: the first failure is the one to see
            everyone = []
        joined = [r for r, calls in enumerate(everyone) if any(c["kind"] == "join" for c in calls)]
        active = [r for r in range(len(everyone)) if r not in joined]
        common = _common(everyone, active)
        if joined and active and common:
            _resume(failed, everyone[active[0]], common, joined)
            return
        others = {c["kind"] for calls in everyone for c in calls} - {"barrier", "join"}
        for h in failed:
            if (h.kind == "join" and joined and active) or (h.kind == "barrier" and others):
                h.resubmit()  # the ranks that failed their calls will come here next
            else:
                h.error = error


def _common(everyone, active):
    """The names every active rank called, in the first active rank's order."""
    if not active:
        return []
    sets = [{c["name"] for c in everyone[r]} for r in active]
    return [c["name"] for c in everyone[active[0]] if all(c["name"] in s for s in sets)]


def _resume(failed, described, common, joined):
    """Submits again what can run now: stand-ins on a joined rank, the calls elsewhere."""
    by_name = {c["name"]: c for c in described}
    if ddl.rank() in joined:
        for name in common:
            call = by_name[name]
            if call["standin"] is not None:
                _negotiate.submit(name, _zeros_fn(call["standin"]), call["sig"])
        for h in failed:
            h.resubmit()
        return
    for h in failed:
        if h.name in common and by_name[h.name]["standin"] is None:
            h.error = JoinedError(
                f"hvd.{h.kind} {h.name!r} cannot run: rank(s) {', '.join(map(str, joined))} "
                "called hvd.join(), and a joined rank takes part in allreduces only; call "
                f"hvd.join() on this rank too, or make the {h.kind} before any rank joins")
        else:
            h.resubmit()


def _zeros_fn(standin):
    """A joined rank's part in an allreduce: zeros of the dtypes and shapes the others send."""
    specs, op = standin

    def contribute():
        zeros = [_zeros(dtype, shape) for dtype, shape in specs]
        ddl.allreduce_n(zeros, op=op)

    return contribute


def _zeros(dtype, shape):
    if dtype == "bfloat16":
        import torch  # noqa: PLC0415 (only numpy's dtypes otherwise)

        return torch.zeros(shape, dtype=torch.bfloat16)
    return np.zeros(shape, dtype=np.dtype(dtype))

