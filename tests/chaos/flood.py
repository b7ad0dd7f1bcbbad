"""What the rendezvous flooders share (rdzv_flood.py for per-node mode's rendezvous,
ddl_rdzv_flood.py for libddl's): kinds of attack, each run by several threads that reconnect
whenever the server closes them, until the flood's time is up, counted per kind. Standard
library only; imported from the flooders' own folder.

    flood = Flood("NAME", host, port, seconds)
    def idle(s):
        while flood.running():
            time.sleep(0.2)
    flood.run([("idle", idle, 20)], report_every=None)
"""
import os
import signal
import socket
import threading
import time


class Flood:
    def __init__(self, name, host, port, seconds):
        self.name, self.host, self.port, self.seconds = name, host, port, seconds
        self.until = time.monotonic() + seconds
        self.counts = {}
        self.lock = threading.Lock()

    def running(self):
        return time.monotonic() < self.until

    def attack(self, kind, send):
        """Connects, counts and runs send(socket) until the time is up, reconnecting."""
        while self.running():
            try:
                with socket.create_connection((self.host, self.port), timeout=2) as s:
                    s.settimeout(1)
                    with self.lock:
                        self.counts[kind] = self.counts.get(kind, 0) + 1
                    send(s)
            except OSError:
                time.sleep(0.05)

    def summary(self):
        with self.lock:
            done = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        spent = self.seconds - max(0, self.until - time.monotonic())
        return f"{self.name}: {done} connections in {spent:.0f} s"

    def run(self, kinds, report_every=None):
        """Runs n threads of each (kind, send, n) until the time is up, printing the summary
        every `report_every` seconds (None: only at the end) and when ended by SIGTERM."""

        def stopped(*_):  # SIGTERM: say what was done, and go
            print(self.summary(), flush=True)
            os._exit(0)

        signal.signal(signal.SIGTERM, stopped)
        threads = [threading.Thread(target=self.attack, args=(kind, send), daemon=True)
                   for kind, send, n in kinds for _ in range(n)]
        for t in threads:
            t.start()
        while report_every is not None and self.running():
            time.sleep(report_every)
            print(self.summary(), flush=True)
        for t in threads:
            t.join(max(0, self.until - time.monotonic()) + 5)
        print(self.summary())
