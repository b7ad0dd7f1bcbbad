"""Horovod's timeline: a Chrome trace (chrome://tracing, Perfetto) of every collective's
negotiation and run on rank 0.

How it works: while a timeline is on (start_timeline(path), or HOROVOD_TIMELINE=path at
init), horovod.common.controller wraps each collective it submits: the wrapper records when
the call was submitted, when the negotiator ran it (the end of its NEGOTIATE_<KIND> phase and
the start of <KIND>) and when it returned. Each call name is one row ("process" of the trace,
named after the call, e.g. allreduce.loss); with mark_cycles, a CYCLE_START instant marks the
moment the negotiator let each call run (the cycle that agreed on it). As Horovod's, the file
is written while the job runs, each event as it happens: "[", the metadata (the wall-clock start
of the trace, start_time_since_epoch_in_micros), then ",EVENT" lines, flushed, so a trace can be
read during a run and survives a crash (Chrome and Perfetto read the array unterminated);
stop_timeline() (or a new start_timeline) closes the array. Only rank 0 writes.
"""

import json
import threading
import time

import ddl

__all__ = ["start_timeline", "stop_timeline", "wrap"]

_lock = threading.Lock()
_state = {"file": None, "cycles": False, "rows": {}, "origin": 0.0}


def _now_us():
    return (time.time() - _state["origin"]) * 1e6


def _write(record):
    """Appends one trace record to the open file, flushed."""
    _state["file"].write(",\n" + json.dumps(record))
    _state["file"].flush()


def start_timeline(file_path, mark_cycles=False):
    """Starts recording into file_path (rank 0 writes it as the events come); a timeline
    already on is closed first."""
    stop_timeline()
    origin = time.time()
    out = None
    if ddl.rank() == 0:
        out = open(file_path, "w", encoding="utf-8")
        out.write("[\n" + json.dumps({"name": "trace", "ph": "M", "pid": 0, "args": {
            "start_time_since_epoch_in_micros": int(origin * 1e6)}}))
        out.flush()
    with _lock:
        _state.update(file=out, cycles=bool(mark_cycles), rows={}, origin=origin)


def stop_timeline():
    """Stops recording and closes the trace's array; nothing when no timeline is on."""
    with _lock:
        out = _state["file"]
        _state.update(file=None, rows={})
    if out is not None:
        out.write("\n]\n")
        out.close()


def _row(name):
    """The trace process of call `name` (created with its name on first use)."""
    rows = _state["rows"]
    if name not in rows:
        rows[name] = len(rows) + 1
        _write({"name": "process_name", "ph": "M", "pid": rows[name], "args": {"name": name}})
    return rows[name]


def _event(name, phase, what, at):
    with _lock:
        if _state["file"] is None:
            return
        _write({"name": what, "ph": phase, "ts": at, "pid": _row(name), "tid": 0})


def wrap(kind, name, fn):
    """fn, recording its negotiation and run when this rank writes a timeline (fn itself
    otherwise)."""
    if _state["file"] is None:
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
