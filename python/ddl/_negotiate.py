"""ddl._negotiate: asynchronous collectives matched by name across ranks, as Horovod's
controller matches them, rather than by the order each rank called them in.

How it works: submit(name, fn) records the call as pending on this rank and queues one
negotiation cycle on ddl's worker thread (ddl._worker). A cycle takes this rank's pending
calls, in the order they were submitted, and sends the 64-bit hashes of their names, with a
flag saying whether a thread of this rank is blocked waiting for one of them, to every rank in
one small allgather (a second one only when a rank has more than _WINDOW calls pending). The
calls that every rank announced are agreed, in rank 0's order, and each rank runs them in that
order right after the allgather: the same collectives in the same order everywhere, whatever
order the ranks called them in. A call some rank has not announced yet stays pending for a
later cycle. A cycle on a rank with nothing pending is skipped: every cycle is the same
allgather, so the other ranks' cycle pairs with this rank's next one. A wait for a call that is
still pending, with no cycle queued, queues one of its own; when every rank is waiting and no
name is common to all of them, no call can ever be agreed (the ranks called differently named
collectives): every rank raises NameMismatch, naming what it called that the others did not,
and forgets its pending calls, instead of hanging or pairing tensors that do not belong
together. One cycle costs one allgather of (2 + _WINDOW) int64 whatever number of calls it
agrees (the calls of a fusion cycle, a bucket of gradients, share it).
"""

import hashlib
import threading

import torch

from . import _worker

__all__ = ["NameMismatch", "submit"]

_WINDOW = 32  # names per rank in the first allgather of a cycle


class NameMismatch(RuntimeError):
    """The ranks wait for collectives that are named differently: none can run."""


class Call:
    """One named collective: a handle with done() and wait()."""

    __slots__ = ("name", "key", "fn", "_event", "_result", "_error")

    def __init__(self, name, fn):
        self.name, self.key, self.fn = name, _key(name), fn
        self._event = threading.Event()
        self._result = self._error = None

    def done(self):
        return self._event.is_set()

    def wait(self):
        """The collective's result, once every rank called it; raises what it raised."""
        global _waiters, _queued
        with _cond:
            _waiters += 1
            try:
                while not self._event.is_set():
                    if _queued == 0:
                        _queue_cycle()
                    _cond.wait()
            finally:
                _waiters -= 1
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self, result=None, error=None):
        self._result, self._error = result, error
        self._event.set()


_cond = threading.Condition()
_pending = []  # Calls submitted and not agreed yet, in submission order
_waiters = 0  # threads in Call.wait()
_queued = 0  # cycles queued on the worker and not yet ended


def _key(name):
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little",
                          signed=True)


def submit(name, fn):
    """Queues fn() to run once every rank has submitted a call named `name`; a Call."""
    call = Call(name, fn)
    with _cond:
        if any(p.name == name for p in _pending):
            raise ValueError(f"a collective named {name!r} is still pending on this rank: "
                             "names of calls in flight must be unique")
        _pending.append(call)
        _queue_cycle()
    return call


def _queue_cycle():
    """(under _cond) one more cycle on the worker thread."""
    global _queued
    _queued += 1
    _worker.submit(_cycle)


def _cycle():
    """On the worker thread: agree on the calls every rank has pending, run them in order."""
    global _queued
    try:
        with _cond:
            calls, waiting = list(_pending), _waiters > 0
        if calls:
            _negotiate(calls, waiting)
    finally:
        with _cond:
            _queued -= 1
            _cond.notify_all()


def _announce(calls, waiting):
    """Every rank's [waiting, count, keys...], padded: an int64 tensor of one row per rank."""
    import ddl  # noqa: PLC0415 (ddl imports this module's users)

    keys = [c.key for c in calls]
    row = torch.zeros(2 + _WINDOW, dtype=torch.int64)
    row[0], row[1] = int(waiting), len(keys)
    row[2:2 + min(len(keys), _WINDOW)] = torch.tensor(keys[:_WINDOW], dtype=torch.int64)
    rows = ddl.allgather(row.unsqueeze(0))
    most = int(rows[:, 1].max())
    if most <= _WINDOW:
        return rows
    full = torch.zeros(2 + most, dtype=torch.int64)
    full[:2] = row[:2]
    full[2:2 + len(keys)] = torch.tensor(keys, dtype=torch.int64)
    return ddl.allgather(full.unsqueeze(0))


def _negotiate(calls, waiting):
    try:
        rows = _announce(calls, waiting)
    except BaseException as e:  # noqa: BLE001 (the job is broken: every waiter hears it)
        _fail(calls, e)
        return
    announced = [set(r[2:2 + int(r[1])].tolist()) for r in rows]
    common = set.intersection(*announced)
    mine = {c.key: c for c in calls}
    agreed = [mine[k] for k in rows[0, 2:2 + int(rows[0, 1])].tolist() if k in common]
    if not agreed and all(int(r[0]) for r in rows):
        _fail(calls, NameMismatch(_mismatch(calls, announced)))
        return
    with _cond:
        for call in agreed:
            _pending.remove(call)
    for call in agreed:
        try:
            call._finish(result=call.fn())
        except BaseException as e:  # noqa: BLE001 (given to the waiter)
            call._finish(error=e)


def _mismatch(calls, announced):
    """The text of NameMismatch: what this rank called that which ranks did not."""
    parts = []
    for call in calls:
        missing = [str(r) for r, keys in enumerate(announced) if call.key not in keys]
        parts.append(f"{call.name!r} (not called by rank{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(missing)})")
    return ("every rank waits for a collective that another rank did not call, so none can "
            "run: this rank called " + ", ".join(parts) + "; give each collective the same "
            "name= on every rank (or no name, and the same order)")


def _fail(calls, error):
    with _cond:
        for call in calls:
            if call in _pending:
                _pending.remove(call)
    for call in calls:
        call._finish(error=error)
