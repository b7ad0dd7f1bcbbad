#!/usr/bin/env python3
"""A stranger flooding libddl's rendezvous, where the ranks meet (issue 27, as rdzv_flood.py
floods per-node mode's): for SECONDS, as many connections as the kinds below allow at once,
each reopened when the server closes it:
  stream   the magic DDLRV2, then megabytes as fast as the server takes them;
  garbage  an HTTP request of 64 KiB;
  wrong    a hello with a wrong proof, then a 1 MiB value;
  trickle  a byte a second;
  idle     connect and say nothing (more of them than the server lets wait).
Prints what it did every half second and at its end (also when ended by SIGTERM): killed with
the rank that started it, its last line says. Standard library only.

    ddl_rdzv_flood.py HOST PORT SECONDS
"""
import os
import signal
import socket
import struct
import sys
import threading
import time

host, port, seconds = sys.argv[1].strip("[]"), int(sys.argv[2]), float(sys.argv[3])
until = time.monotonic() + seconds
counts = {}
lock = threading.Lock()


def attack(name, send):
    while time.monotonic() < until:
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.settimeout(1)
                with lock:
                    counts[name] = counts.get(name, 0) + 1
                send(s)
        except OSError:
            time.sleep(0.05)


def stream(s):
    chunk = b"DDLRV2" + b"x" * 65530
    while time.monotonic() < until:
        s.sendall(chunk)


def garbage(s):
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"h" * 65536)
    s.recv(1)


def wrong(s):
    s.sendall(b"DDLRV2" + struct.pack(">II", 0, 2) + b"p" * 32)
    s.sendall(struct.pack(">III", 0, 1000, 1 << 20) + b"v" * (1 << 20))
    s.recv(1)


def trickle(s):
    while time.monotonic() < until:
        s.sendall(b"D")
        time.sleep(1)


def idle(s):
    while time.monotonic() < until:
        time.sleep(0.2)


def summary():
    with lock:
        done = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return f"ddl_rdzv_flood: {done} connections in {seconds - max(0, until - time.monotonic()):.0f} s"


def stopped(*_):  # SIGTERM: say what was done, and go
    print(summary(), flush=True)
    os._exit(0)


signal.signal(signal.SIGTERM, stopped)
threads = []
for name, send, n in (("stream", stream, 10), ("garbage", garbage, 4), ("wrong", wrong, 4),
                      ("trickle", trickle, 10), ("idle", idle, 60)):
    for _ in range(n):
        threads.append(threading.Thread(target=attack, args=(name, send), daemon=True))
for t in threads:
    t.start()
while time.monotonic() < until:
    time.sleep(0.5)
    print(summary(), flush=True)
for t in threads:
    t.join(5)
print(summary())
