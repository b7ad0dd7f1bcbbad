#!/usr/bin/env python3
"""A stranger flooding libddl's rendezvous, where the ranks meet (as rdzv_flood.py
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
import struct
import sys
import time

from flood import Flood

flood = Flood("ddl_rdzv_flood", sys.argv[1].strip("[]"), int(sys.argv[2]), float(sys.argv[3]))


def stream(s):
    chunk = b"DDLRV2" + b"x" * 65530
    while flood.running():
        s.sendall(chunk)


def garbage(s):
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"h" * 65536)
    s.recv(1)


def wrong(s):
    s.sendall(b"DDLRV2" + struct.pack(">II", 0, 2) + b"p" * 32)
    s.sendall(struct.pack(">III", 0, 1000, 1 << 20) + b"v" * (1 << 20))
    s.recv(1)


def trickle(s):
    while flood.running():
        s.sendall(b"D")
        time.sleep(1)


def idle(s):
    while flood.running():
        time.sleep(0.2)


flood.run([("stream", stream, 10), ("garbage", garbage, 4), ("wrong", wrong, 4),
           ("trickle", trickle, 10), ("idle", idle, 60)], report_every=0.5)
