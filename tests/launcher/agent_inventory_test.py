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


def ask_agent(ddlrun):
    """ddlrun --probe's inventory, then a new agent's answer to an inventory request; the agent
    left (its stdin closed: ddlrun is gone) with status 1, as no job came."""
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
        agent.stdin.close()
        status = agent.wait(timeout=20)
        if status != 1:
            sys.exit("agent_inventory: the agent exited with %d, not 1 (no job came)" % status)
        return expected, payload
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def main():
    ddlrun = sys.argv[1]
    # The host's NICs may change between the two probes (a namespace test run beside this one
    # adds its bridge): a difference is asked again, twice at most.
    for _ in range(3):
        expected, payload = ask_agent(ddlrun)
        if payload == expected:
            print("agent_inventory: ok (%d bytes of inventory)" % len(expected))
            return
    sys.exit("agent_inventory: the agent's inventory differs from ddlrun --probe's, 3 times:\n"
             + payload.decode(errors="replace") + "\nddlrun --probe's:\n"
             + expected.decode(errors="replace"))


main()
