"""Horovod's timeline: a Chrome trace (chrome://tracing, Perfetto) of every collective's
negotiation and run on rank 0.

How it works: while a timeline is on (start_timeline(path), or HOROVOD_TIMELINE=path at
init), horovod.common.controller wraps each collective it submits: the wrapper records when
the call was submitted, when the negotiator ran it (the end of its NEGOTIATE_<KIND> phase and
the start of <KIND>) and when it returned. Each call name is one row ("process" of the trace,
named after the call, e.g. allreduce.loss); with mark_cycles, a CYCLE_START instant marks the
moment the negotiator let each call run (the cycle that agreed on it). stop_timeline()
(or a new start_timeline) writes the events as one JSON array, with the wall-clock start of the
trace in its metadata (start_time_since_epoch_in_micros). Only rank 0 writes.
"""

import json
import threading
import time

import ddl

__all__ = ["start_timeline", "stop_timeline", "wrap"]

_lock = threading.Lock()
_state = {"path": None, "cycles": False, "events": [], "rows": {}, "origin": 0.0}


def _now_us():
    return (time.time() - _state["origin"]) * 1e6


def start_timeline(file_path, mark_cycles=False):
    """Starts recording into file_path (written by stop_timeline); a timeline already on is
    written first."""
    if _state["path"] is not None:
        stop_timeline()
    with _lock:
        _state.update(path=str(file_path), cycles=bool(mark_cycles), events=[], rows={},
                      origin=time.time())


def stop_timeline():
    """Stops recording and writes the trace (on rank 0); nothing when no timeline is on."""
    with _lock:
        path, events = _state["path"], _state["events"]
        _state.update(path=None, events=[], rows={})
    if path is None or ddl.rank() != 0:
        return
    meta = {"name": "trace", "ph": "M", "pid": 0,
            "args": {"start_time_since_epoch_in_micros": int(_state["origin"] * 1e6)}}
    with open(path, "w", encoding="utf-8") as out:
        json.dump([meta] + events, out, indent=0)


def _row(name):
    """The trace process of call `name` (created with its name on first use)."""
    rows = _state["rows"]
    if name not in rows:
        rows[name] = len(rows) + 1
        _state["events"].append({"name": "process_name", "ph": "M", "pid": rows[name],
                                 "args": {"name": name}})
    return rows[name]


def _event(name, phase, what, at):
    with _lock:
        if _state["path"] is None:
            return
        _state["events"].append({"name": what, "ph": phase, "ts": at, "pid": _row(name),
                                 "tid": 0})


def wrap(kind, name, fn):
    """fn, recording its negotiation and run when a timeline is on (fn itself otherwise)."""
    if _state["path"] is None:
        return fn
    label = kind.upper()
    _event(name, "B", f"NEGOTIATE_{label}", _now_us())

    def timed():
        at = _now_us()
        _event(name, "E", f"NEGOTIATE_{label}", at)
        if _state["cycles"]:
            _event(name, "i", "CYCLE_START", at)
        _event(name, "B", label, at)
        try:
            return fn()
        finally:
            _event(name, "E", label, _now_us())

    return timed
