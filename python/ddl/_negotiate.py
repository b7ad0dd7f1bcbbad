"""ddl._negotiate: asynchronous collectives matched by name across ranks, as Horovod's
controller matches them, rather than by the order each rank called them in, and checked before
any of their data moves.

How it works: submit(name, fn, sig, group) records the call as pending on this rank and queues
one negotiation cycle of its group (None: the whole job) on ddl's worker thread (ddl._worker). A
cycle takes this rank's pending calls of the group, in the order they were submitted, and sends
the 64-bit hashes of their names and of their signatures (what every rank's call of that name
must agree on: kind, dtype, shape, op, root, as the caller describes it), with a flag saying
whether a thread of this rank is blocked waiting for one of them, to every member in one small
allgather (a second one only when a rank has more than _WINDOW calls pending). The calls that
every member announced are agreed, in the first member's order, and each member runs them in
that order right after the allgather: the same collectives in the same order everywhere,
whatever order the ranks called them in. An agreed call whose signature differs between members
does not run anywhere: one more allgather brings every member's description of it, and every
member's call raises CallMismatch naming two members and their calls. Nothing of it was sent,
so the communicator stays usable and later calls run as usual. A call some member has not
announced yet stays pending for a later cycle. A cycle on a rank with nothing pending is
skipped: every cycle is the same allgather, so the other ranks' cycle pairs with this rank's
next one. A wait for a call that is still pending, with no cycle queued, queues one of its own;
when every member is waiting and no name is common to all of them, no call can ever be agreed
(the ranks called differently named collectives): every member raises NameMismatch, naming what
it called that the others did not, and forgets its pending calls, instead of hanging or pairing
tensors that do not belong together. join() (Horovod's, for uneven data) is a call of its own
whose flag rides on the announcement: while some members have joined, the calls every other
member announced are agreed; one more exchange brings their signatures, and a joined member
stands in for an allreduce with zeros of the same shape (the same libddl call), while any other
kind fails on every member; once every member has joined, each join returns the member that
joined last. One cycle costs one allgather of (2 + 2 * _WINDOW) int64
whatever number of calls it agrees (the calls of a fusion cycle, a bucket of gradients, share
it). The arrays are numpy's, so torch, TensorFlow and numpy callers share one negotiation.
"""

import hashlib
import os
import sys
import threading
import time

import numpy as np

from . import _worker
from ._ddl import MismatchError

__all__ = ["NameMismatch", "CallMismatch", "submit", "submit_now", "join"]

_WINDOW = 32  # calls per rank in the first allgather of a cycle


class NameMismatch(RuntimeError):
    """The ranks wait for collectives that are named differently: none can run."""


class CallMismatch(MismatchError):
    """The ranks called the collective of one name with different arguments; it did not run
    anywhere, and the job goes on."""


class Call:
    """One named collective: a handle with done() and wait()."""

    __slots__ = ("name", "key", "sig", "sig_key", "fn", "group", "failed", "stand_in", "since",
                 "_event", "_result", "_error")

    def __init__(self, name, fn, sig, group, failed=None):
        self.name, self.key, self.fn, self.group, self.failed = name, _key(name), fn, group, failed
        self.sig, self.stand_in, self.since = sig, None, time.monotonic()
        self.sig_key = _key(repr(sig)) if sig is not None else 0
        self._event = threading.Event()
        self._result = self._error = None

    def done(self):
        return self._event.is_set()

    def wait(self):
        """The collective's result, once every member called it; raises what it raised."""
        global _waiters
        with _cond:
            _waiters += 1
            try:
                while not self._event.is_set():
                    if _queued.get(_group_key(self.group), 0) == 0:
                        _queue_cycle(self.group)
                    _cond.wait()
            finally:
                _waiters -= 1
        if self._error is not None:
            raise self._error
        return self._result

    def describe(self):
        return f"{self.name!r}" if self.sig is None else f"{self.name!r} {_text(self.sig)}"

    def _finish(self, result=None, error=None):
        self._result, self._error = result, error
        self._event.set()
        if error is not None and self.failed is not None:
            self.failed(error)


_JOIN = "\0join"  # the name of a join() call
_JOINABLE = {("allreduce",)}  # signature kinds a joined rank stands in for
_joined_before = {}  # group key -> members seen joined in earlier cycles of the current join

_cond = threading.Condition()
_pending = {}  # group key -> Calls submitted and not agreed yet, in submission order
_waiters = 0  # threads in Call.wait()
_queued = {}  # group key -> cycles queued on the worker and not yet ended


def _key(text):
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little",
                          signed=True)


_JOIN_KEY = _key(_JOIN)


def join(stand_in, group=None):
    """This rank makes no more calls of `group` until every member has joined; a Call whose
    result is the member that joined last. Meanwhile, an allreduce ("allreduce" signature) that
    every other member calls runs here through stand_in(sig)(), which must make the same libddl
    call with zeros; any other call fails on every member."""
    call = submit(_JOIN, None, sig=("join",), group=group)
    call.stand_in = stand_in
    return call


def _group_key(group):
    return None if group is None else id(group)


def _text(sig):
    """A signature as the errors show it: kind(args)."""
    if isinstance(sig, tuple) and sig and isinstance(sig[0], str):
        return f"{sig[0]}({', '.join(str(a) for a in sig[1:])})"
    return repr(sig)


def submit(name, fn, sig=None, group=None, failed=None):
    """Queues fn() to run once every member of `group` (a ddl.Group; None: every rank) has
    submitted a call named `name`; a Call. `sig` (a tuple of plain values, e.g. ("allreduce",
    "float32", (4, 2), "sum")) is what the members' calls of that name must agree on: when
    they differ, fn runs nowhere and every member's wait() raises CallMismatch. `failed(error)`,
    when given, is called (on the worker thread) when the call fails instead of running."""
    call = Call(name, fn, sig, group, failed)
    with _cond:
        _add(call)
        _queue_cycle(group)
    return call


def submit_now(name, fn, sig=None, group=None, failed=None):
    """submit() for a caller about to wait: when ddl's worker thread is idle with nothing
    queued, the negotiation cycle runs on the calling thread (the worker held meanwhile), which
    spares the hand-off to the worker and back; otherwise as submit(). A Call either way."""
    call = Call(name, fn, sig, group, failed)
    gk = _group_key(group)
    with _cond:
        _add(call)
        inline = _queued.get(gk, 0) == 0 and _worker.hold()
        if inline:
            _queued[gk] = 1
        else:
            _queue_cycle(group)
    if inline:
        try:
            _cycle(group)
        finally:
            _worker.release()
    return call


def _add(call):
    """(under _cond) call, pending on this rank; ValueError when its name is pending already."""
    pending = _pending.setdefault(_group_key(call.group), [])
    if any(p.name == call.name for p in pending):
        raise ValueError(f"a collective named {call.name!r} is still pending on this rank: "
                         "names of calls in flight must be unique")
    pending.append(call)
    _watch()


_watcher = None


def _watch():
    """(under _cond) starts the stall watcher once: every 10 s it names, once each, the calls
    this rank has waited for longer than DDL_STALL_SECONDS (default 60; 0: never), as
    Horovod's stall inspector does, since a call no other rank makes waits forever."""
    global _watcher
    if _watcher is None:
        limit = float(os.environ.get("DDL_STALL_SECONDS", "60") or 0)
        _watcher = threading.Thread(target=_stalls, args=(limit,), name="ddl-stall-watch",
                                    daemon=True)
        if limit > 0:
            _watcher.start()


def _stalls(limit):
    told = set()
    while True:
        time.sleep(min(10.0, limit))
        with _cond:
            late = [c for calls in _pending.values() for c in calls
                    if time.monotonic() - c.since > limit and id(c) not in told]
        for call in late:
            told.add(id(call))
            rank = os.environ.get("DDL_RANK", "?")
            name = "join()" if call.key == _JOIN_KEY else repr(call.name)
            print(f"ddl: rank {rank} has waited {limit:g} s for the collective {name}, which "
                  "another rank has not called yet: every rank must make collectives of the "
                  "same names (DDL_STALL_SECONDS sets this warning's delay)", file=sys.stderr,
                  flush=True)


def _queue_cycle(group):
    """(under _cond) one more cycle of `group` on the worker thread."""
    gk = _group_key(group)
    _queued[gk] = _queued.get(gk, 0) + 1
    _worker.submit(lambda: _cycle(group))


def _cycle(group):
    """On the worker thread: agree on the calls every member has pending, run them in order."""
    gk = _group_key(group)
    try:
        with _cond:
            calls, waiting = list(_pending.get(gk, ())), _waiters > 0
        if calls:
            _negotiate(calls, waiting, group)
    finally:
        with _cond:
            _queued[gk] -= 1
            _cond.notify_all()


def _allgather(row, group):
    import ddl  # noqa: PLC0415 (ddl's package imports this module's users)

    return ddl.allgather(row[np.newaxis], group=group)


def _announce(calls, waiting, group):
    """Every member's [waiting, count, name key, signature key, ...], padded: an int64 array
    of one row per member."""
    keys = [k for c in calls for k in (c.key, c.sig_key)]
    row = np.zeros(2 + 2 * _WINDOW, dtype=np.int64)
    row[0], row[1] = int(waiting), len(calls)
    row[2:2 + min(len(keys), 2 * _WINDOW)] = keys[:2 * _WINDOW]
    rows = _allgather(row, group)
    most = int(rows[:, 1].max())
    if most <= _WINDOW:
        return rows
    full = np.zeros(2 + 2 * most, dtype=np.int64)
    full[:2] = row[:2]
    full[2:2 + len(keys)] = keys
    return _allgather(full, group)


def _negotiate(calls, waiting, group):
    gk = _group_key(group)
    joining = any(c.key == _JOIN_KEY for c in calls)
    try:
        rows = _announce(calls, waiting | (joining << 1), group)
    except BaseException as e:  # noqa: BLE001 (the job is broken: every waiter hears it)
        _fail(calls, e)
        return
    joined = [bool(int(r[0]) & 2) for r in rows]
    if all(joined):
        _end_join(calls, joined, gk)
        return
    _joined_before.setdefault(gk, set()).update(r for r, j in enumerate(joined) if j)
    announced = [dict(zip(r[2:2 + 2 * int(r[1]):2].tolist(), r[3:3 + 2 * int(r[1]):2].tolist()))
                 for r in rows]
    active = [r for r, j in enumerate(joined) if not j]
    common = set.intersection(*(set(announced[r]) for r in active)) - {_JOIN_KEY}
    lead = rows[active[0]]
    agreed = [k for k in lead[2:2 + 2 * int(lead[1]):2].tolist() if k in common]
    if not agreed:
        if not any(joined) and all(int(r[0]) & 1 for r in rows):
            _fail(calls, NameMismatch(_mismatch(calls, [set(a) for a in announced])))
        return
    mine = {c.key: c for c in calls}
    with _cond:
        for key in agreed:
            if key in mine:
                _pending[gk].remove(mine[key])
    differing = {k for k in agreed if len({announced[r][k] for r in active}) > 1}
    texts = _texts(agreed, mine, group) if differing or any(joined) else None
    for key in agreed:
        _run_agreed(key, mine.get(key), differing, texts, active, joined, calls)


def _run_agreed(key, call, differing, texts, active, joined, calls):
    """Runs one agreed call here: its fn, a joined rank's stand-in, or its refusal."""
    error = None
    lead = texts[active[0]][key] if texts else None
    if key in differing:
        other = next(r for r in active if texts[r][key][1] != lead[1])
        error = CallMismatch(
            f"collective mismatch: rank {active[0]} called {lead[0]} but rank {other} called "
            f"{texts[other][key][0]}; it ran on no rank (give every rank's call of one name "
            "the same kind, dtype, shape, op and root)")
    elif any(joined) and tuple((lead[1] or ())[:1]) not in _JOINABLE:
        error = CallMismatch(
            f"{lead[0]} cannot run while rank "
            f"{', '.join(str(r) for r, j in enumerate(joined) if j)} has joined (join() stands "
            "in for allreduces only); it ran on no rank")
    if call is None:  # this rank has joined
        if error is None:
            next(c for c in calls if c.key == _JOIN_KEY).stand_in(lead[1])()
        return
    if error is not None:
        call._finish(error=error)
        return
    try:
        call._finish(result=call.fn())
    except BaseException as e:  # noqa: BLE001 (given to the waiter)
        call._finish(error=e)


def _texts(keys, mine, group):
    """Every member's (description, signature) of each call of `keys` ((None, None) where it
    has none): a list by member of {key: (text, sig)}, through two allgathers."""
    import ast  # noqa: PLC0415

    raw = [repr((mine[k].describe(), mine[k].sig) if k in mine else (None, None)).encode()
           for k in keys]
    lengths = _allgather(np.array([len(r) for r in raw], dtype=np.int64), group)
    most = int(lengths.max())
    padded = np.zeros((len(keys), most), dtype=np.uint8)
    for i, r in enumerate(raw):
        padded[i, :len(r)] = np.frombuffer(r, dtype=np.uint8)
    everyone = _allgather(padded.reshape(-1), group).reshape(len(lengths), len(keys), most)
    return [{k: ast.literal_eval(bytes(everyone[m, i, :int(lengths[m, i])]).decode())
             for i, k in enumerate(keys)} for m in range(len(lengths))]


def _end_join(calls, joined, gk):
    """Every member has joined: each one's join returns the member that joined last (the
    highest of those that joined in this cycle)."""
    before = _joined_before.pop(gk, set())
    last = max(set(range(len(joined))) - before or range(len(joined)))
    for call in calls:
        if call.key == _JOIN_KEY:
            with _cond:
                _pending[gk].remove(call)
            call._finish(result=last)


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
            pending = _pending.get(_group_key(call.group), [])
            if call in pending:
                pending.remove(call)
    for call in calls:
        call._finish(error=error)
