#!/usr/bin/env python3
"""A stranger flooding per-node mode's rendezvous: for SECONDS, as many connections
as the kinds below allow at once, each reopened when node 0 closes it:
  prefix   length prefixes just under 64 MiB, then the bytes as fast as node 0 takes them;
  fields   hellos of 64 fields of 1 MiB each;
  trickle  a byte a second;
  refused  a hello with a wrong proof and a 200 KB node rank, never reading the refusal;
  idle     connect and say nothing.
Prints what it did (also when ended by SIGTERM). Standard library only.

    rdzv_flood.py HOST PORT SECONDS
"""
import socket
import struct
import sys
import time

from flood import Flood

flood = Flood("rdzv_flood", sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))


def message(kind, fields):
    out = bytes([kind]) + struct.pack(">I", len(fields))
    for f in fields:
        out += struct.pack(">I", len(f)) + f
    return out


def prefix(s):
    s.sendall(bytes([1]) + struct.pack(">II", 9, (64 << 20) - 64))  # under the old 64 MiB limit
    chunk = b"x" * 65536
    while flood.running():
        s.sendall(chunk)


def fields(s):
    s.sendall(bytes([1]) + struct.pack(">I", 64))
    for _ in range(64):
        s.sendall(struct.pack(">I", 1 << 20) + b"y" * (1 << 20))


def trickle(s):
    while flood.running():
        s.sendall(b"z")
        time.sleep(1)


def refused(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(message(1, [b"DDLNODE4", b"n" * 16, b"p" * 32, b"1" * 200000, b"3", b"", b"evil",
                          b"", b"0"]))
    while flood.running():
        time.sleep(0.2)


def idle(s):
    while flood.running():
        time.sleep(0.2)


flood.run([("prefix", prefix, 20), ("fields", fields, 4), ("trickle", trickle, 10),
           ("refused", refused, 6), ("idle", idle, 20)])
