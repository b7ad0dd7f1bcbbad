#!/usr/bin/env python3
"""How much of a core each CTest test uses, measured alone: the evidence for the `waits` label.

How it works: `ctest --show-only=json-v1` gives each test's command, working directory,
environment and labels; the last run's timings (Testing/Temporary/CTestCostData.txt) pick those
that took at least --min seconds (every test matching --regex when there are none). Each test
runs alone, as CTest runs it but without starting its fixtures (run the suite once first), in a
cgroup of its own, so that everything it starts counts: the sshd daemons of its namespace hosts
and the ranks they start included. The cgroup's CPU time over the test's wall time is its share
of a core. A row is flagged where the share and the label disagree: `waits` at a third of a core
or more, or no `waits` below a fifth. scripts/test runs the `waits` tests beside the CPU-bound
ones (tests/labels.cmake).

Usage: bench/test_cpu.py BUILD [--min SECONDS] [--regex RE] [--timeout SECONDS]
  --min S      only tests whose last run took at least S seconds (default 4)
  --regex RE   only tests whose name matches RE
  --timeout S  a test still running after S seconds is killed and its row says so (default 300)
Root only (cgroups). Exit status: 0, 1 when a test failed or left a process, 2 bad usage,
77 when no cgroup can be made here.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

WAITS_BELOW = 1 / 3  # a `waits` test uses less than this share of a core
CPU_FROM = 1 / 5  # a test without the label uses at least this share


class Cgroup:
    """A cgroup of its own under cgroup v1's cpuacct or cgroup v2, and the CPU time it used."""

    def __init__(self, name):
        v1 = "/sys/fs/cgroup/cpuacct"
        v2 = next((p for p in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
                   if os.path.exists(p + "/cgroup.procs") and
                   os.path.exists(p + "/cgroup.subtree_control")), None)
        self.v1 = os.path.exists(v1 + "/cpuacct.usage")
        root = v1 if self.v1 else v2
        if root is None:
            raise OSError("neither cgroup v1's cpuacct nor cgroup v2 is mounted")
        self.path = os.path.join(root, name)
        os.mkdir(self.path)

    def join(self):
        with open(self.path + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def pids(self):
        with open(self.path + "/cgroup.procs") as f:
            return [int(p) for p in f.read().split()]

    def cpu_seconds(self):
        if self.v1:
            with open(self.path + "/cpuacct.usage") as f:
                return int(f.read()) / 1e9
        with open(self.path + "/cpu.stat") as f:
            stats = dict(line.split() for line in f)
        return int(stats["usage_usec"]) / 1e6

    def close(self):
        """Waits up to 5 s for the test's processes to end, kills what is left and removes the
        cgroup: the CPU seconds it used and how many processes were left."""
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.pids()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while self.pids():
            time.sleep(0.05)
        used = self.cpu_seconds()
        os.rmdir(self.path)
        return used, len(left)


def last_timings(build):
    """{test: seconds} of the last CTest run in build, or {} before the first."""
    timings = {}
    try:
        with open(os.path.join(build, "Testing/Temporary/CTestCostData.txt")) as f:
            for line in f:
                words = line.split()
                if len(words) == 3:
                    timings[words[0]] = float(words[2])
    except FileNotFoundError:
        pass
    return timings


def tests_of(build):
    """CTest's tests in build: name, command, working directory, environment, labels."""
    shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                           capture_output=True, text=True).stdout
    for test in json.loads(shown)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = dict(os.environ)
        env.update(e.split("=", 1) for e in props.get("ENVIRONMENT", []))
        yield {"name": test["name"], "command": test.get("command"), "env": env,
               "cwd": props.get("WORKING_DIRECTORY", build), "labels": props.get("LABELS", [])}


def measure(test, timeout):
    """Runs test alone in a cgroup of its own: wall seconds, CPU seconds, status, left over."""
    group = Cgroup("ddl_test_cpu_%d" % os.getpid())
    start = time.monotonic()
    proc = subprocess.Popen(test["command"], cwd=test["cwd"], env=test["env"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=group.join)
    try:
        status = str(proc.wait(timeout=timeout))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        status = "timeout"
    wall = time.monotonic() - start
    cpu, left = group.close()
    return wall, cpu, status, left


def verdict(share, labels):
    if "waits" in labels and share >= WAITS_BELOW:
        return "labelled waits, uses %.0f%% of a core" % (100 * share)
    if "waits" not in labels and share < CPU_FROM:
        return "mostly waits: could be labelled waits"
    return ""


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build")
    parser.add_argument("--min", type=float, default=4.0)
    parser.add_argument("--regex", default="")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    try:
        Cgroup("ddl_test_cpu_probe_%d" % os.getpid()).close()
    except OSError as e:
        print("test_cpu: cannot make a cgroup here (%s); skipping" % e, file=sys.stderr)
        return 77
    timings = last_timings(args.build)
    chosen = [t for t in tests_of(args.build) if t["command"] and
              re.search(args.regex, t["name"]) and timings.get(t["name"], args.min) >= args.min]
    print("%-64s %8s %8s %6s  %-6s %s" % ("test", "wall(s)", "cpu(s)", "share", "label", "note"))
    bad = 0
    for test in chosen:
        wall, cpu, status, left = measure(test, args.timeout)
        share = cpu / wall if wall > 0 else 0.0
        notes = [verdict(share, test["labels"])]
        if status not in ("0", "77"):
            notes.append("status " + status)
        if left:
            notes.append("left %d processes (killed)" % left)
        bad |= status not in ("0", "77") or left > 0
        label = "waits" if "waits" in test["labels"] else "cpu"
        print("%-64s %8.1f %8.2f %5.0f%%  %-6s %s" % (test["name"], wall, cpu, 100 * share, label,
                                                     "; ".join(n for n in notes if n)))
        sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
