"""ddl._worker: one thread per process that runs collectives in the order they were issued.

How it works: submit(fn) appends fn to a FIFO queue and returns a Handle at once; the worker
thread (started on first use, a daemon) takes the functions one by one and runs them, so the
collectives they call reach libddl in issue order, which is the same on every rank when the
ranks issue the same calls. libddl releases the GIL while it communicates, so the issuing
thread computes meanwhile (DistributedOptimizer's overlap with the backward pass). A Handle's
wait() returns fn's result or raises its exception; done() polls. A collective called directly
(ddl.allreduce, ...) first waits for everything queued before it (drain()), so direct and queued
calls keep one order; on the worker thread itself drain() does nothing. hold() lends the idle
worker's place to the calling thread (nothing queued starts until release(): ddl._negotiate's
submit_now runs a cycle there, sparing two hand-offs). At exit the interpreter
waits for the queue too (atexit): a rank that ends while a collective still runs on the worker
would otherwise tear libddl down under it (std::terminate).
"""

import atexit
import collections
import threading

__all__ = ["Handle", "submit", "drain"]


class Handle:
    """The pending result of one submitted function."""

    __slots__ = ("_event", "_result", "_error")

    def __init__(self):
        self._event = threading.Event()
        self._result = self._error = None

    def done(self):
        """True once the function has returned or raised."""
        return self._event.is_set()

    def wait(self):
        """The function's result; raises what it raised."""
        self._event.wait()
        if self._error is not None:
            raise self._error
        return self._result


class _Worker:
    def __init__(self):
        self._queue = collections.deque()
        self._ready = threading.Condition()
        self._running = False  # a function is running on the worker thread
        self._held = False  # another thread holds the worker (hold()): nothing starts
        self.holder = None  # that thread's ident: it runs collectives as the worker would
        self.last = None  # the handle submitted last: every earlier one is done when it is
        self._thread = threading.Thread(target=self._run, name="ddl-worker", daemon=True)
        self._thread.start()
        self.ident = self._thread.ident

    def submit(self, fn):
        handle = Handle()
        with self._ready:
            self._queue.append((fn, handle))
            self.last = handle
            self._ready.notify()
        return handle

    def hold(self):
        """True, and nothing queued starts until release(), when the worker is idle with an
        empty queue; False otherwise (then nothing is held)."""
        with self._ready:
            if self._queue or self._running or self._held:
                return False
            self._held, self.holder = True, threading.get_ident()
            return True

    def release(self):
        with self._ready:
            self._held, self.holder = False, None
            if self._queue:
                self._ready.notify()

    def _run(self):
        while True:
            with self._ready:
                while not self._queue or self._held:
                    self._ready.wait()
                fn, handle = self._queue.popleft()
                self._running = True
            try:
                handle._result = fn()
            except BaseException as e:  # noqa: BLE001 (given to the waiter)
                handle._error = e
            with self._ready:
                self._running = False
            handle._event.set()


_worker = None
_start_lock = threading.Lock()


def _started():
    """The worker, started on first use."""
    global _worker
    if _worker is None:
        with _start_lock:
            if _worker is None:
                _worker = _Worker()
                atexit.register(drain)
    return _worker


def submit(fn):
    """Queues fn() to run on the worker thread after everything submitted before; a Handle."""
    return _started().submit(fn)


def hold():
    """Runs nothing on the worker thread until release(), when it is idle with nothing queued:
    True then (the caller may call libddl itself), False otherwise. For a caller that would
    otherwise hand one call to the worker and wait for it."""
    return _started().hold()


def release():
    """Ends hold()."""
    _worker.release()


def drain():
    """Waits until everything submitted so far has run (not on the worker thread itself, nor
    on the thread that holds it: what was queued meanwhile runs after its release)."""
    worker = _worker
    if worker is None or worker.last is None or worker.last.done():
        return
    if threading.get_ident() not in (worker.ident, worker.holder):
        worker.last._event.wait()
