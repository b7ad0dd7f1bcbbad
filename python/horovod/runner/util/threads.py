"""Thread helpers with Horovod's names: in_thread starts a function on a thread of its own."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) on a new thread (a daemon unless daemon=False) and returns the
    thread. silent=True swallows the exception target raises instead of printing it."""
    if not isinstance(args, tuple):
        raise ValueError(f"in_thread: args must be a tuple, not {type(args).__name__}")

    def run():
        try:
            target(*args)
        except BaseException:  # noqa: BLE001 (what silent asks for; printed otherwise)
            if not silent:
                raise

    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
