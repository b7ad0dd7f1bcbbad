#!/usr/bin/env python3
"""`ddlrun --agent` answers an inventory request (the agent protocol's Hw frame) with this
host's inventory, the same YAML that `ddlrun --probe` prints, and goes on waiting for its job.
Usage: agent_inventory_test.py DDLRUN"""

import select
import struct
import subprocess
import sys
import time

INVENTORY = b"\x06"


def frame(kind, ident=0, payload=b""):
    return kind + struct.pack(">iI", ident, len(payload)) + payload


class Frames:
    """The agent's frames as they come on `stream`."""

    def __init__(self, stream):
        self.stream = stream
        self.buffer = b""

    def next(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= 9:
                kind, ident, size = self.buffer[:1], *struct.unpack(">iI", self.buffer[1:9])
                if len(self.buffer) >= 9 + size:
                    payload = self.buffer[9 : 9 + size]
                    self.buffer = self.buffer[9 + size :]
                    return kind, ident, payload
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.stream], [], [], left)[0]:
                sys.exit("agent_inventory: no whole frame from the agent within %d s" % timeout)
            chunk = self.stream.read1(65536)
            if not chunk:
                sys.exit("agent_inventory: the agent closed its output")
            self.buffer += chunk


def main():
    ddlrun = sys.argv[1]
    expected = subprocess.run([ddlrun, "--probe"], check=True, capture_output=True).stdout
    agent = subprocess.Popen([ddlrun, "--agent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        frames = Frames(agent.stdout)
        kind, _, _ = frames.next()
        if kind != b"H":
            sys.exit("agent_inventory: the agent's first frame is %r, not its hello" % kind)
        agent.stdin.write(frame(INVENTORY))
        agent.stdin.flush()
        while True:
            kind, ident, payload = frames.next()
            if kind != b"Y":  # heartbeats
                break
        if kind != INVENTORY or ident != 0:
            sys.exit("agent_inventory: got %r %d %r, not the inventory" % (kind, ident, payload))
        if payload != expected:
            sys.exit("agent_inventory: the agent's inventory differs from ddlrun --probe's:\n"
                     + payload.decode(errors="replace"))
        agent.stdin.close()  # ddlrun is gone: the agent leaves
        status = agent.wait(timeout=20)
        if status != 1:
            sys.exit("agent_inventory: the agent exited with %d, not 1 (no job came)" % status)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    print("agent_inventory: ok (%d bytes of inventory)" % len(expected))


main()
