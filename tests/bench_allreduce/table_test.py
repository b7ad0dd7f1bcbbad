#!/usr/bin/env python3
"""bench.allreduce_table: bench/allreduce_table.py on saved logs.

table_logs.txt holds allreduce_compare.sh --keep logs of two runs on 2 and 4 ranks (every
optional column: ddl-base, ddl-shared, torch-gloo, two forced MPI algorithms; one wrong element
count). table_expected.txt is what allreduce_compare.sh's table printed for them: the 2-rank and
4-rank tables against the memory limits and the 2-rank logs against a link limit. The test
checks that output byte for byte, the exit status on wrong elements, the errors for a missing
log and a bad --limit, and that allreduce_compare.sh --tables prints the same tables through
the python3 on PATH.

Usage: table_test.py SOURCE_DIR
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def unpack(fixture, into):
    """Writes each "==> PATH <==" section of fixture to into/PATH."""
    out = None
    with open(fixture, encoding="utf-8") as text:
        for line in text:
            if line.startswith("==> "):
                if out:
                    out.close()
                path = os.path.join(into, line[4:].rstrip("\n")[: -len(" <==")])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                out = open(path, "w", encoding="utf-8")
            elif out:
                out.write(line)
    if out:
        out.close()


def logs_of(directory):
    names = sorted(os.listdir(directory))
    sweeps = [n for n in names if n.endswith(".sweep")]
    lats = [n for n in names if n.endswith(".lat")]
    return [os.path.join(directory, n) for n in sweeps + lats]


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def main(source):
    table = [sys.executable, os.path.join(source, "bench", "allreduce_table.py")]
    with open(os.path.join(HERE, "table_expected.txt"), encoding="utf-8") as f:
        expected = f.read()
    problems = []
    with tempfile.TemporaryDirectory() as work:
        unpack(os.path.join(HERE, "table_logs.txt"), work)
        local2, local4 = os.path.join(work, "local2"), os.path.join(work, "local4")
        common = ["--type", "float32", "--runs", "2", "--cores", "2"]
        cases = [
            (["--title", "this host, 2 ranks", "--ranks", "2", "--limit", "mem", "--have-gloo",
              "--torch-version", "2.13.0+cpu"] + logs_of(local2), 0),
            (["--title", "this host, 4 ranks", "--ranks", "4", "--limit", "mem", "--have-gloo",
              "--torch-version", "2.13.0+cpu"] + logs_of(local4), 1),
            (["--title", "2 hosts x 1 rank, links shaped to 8gbit (floor S / link)", "--ranks", "2",
              "--limit", "link:1.000000e-09"] + logs_of(local2), 0),
        ]
        printed = ""
        for args, status in cases:
            result = run(table + common + args)
            printed += result.stdout
            if result.returncode != status:
                problems.append("%s: exit %d, not %d" % (args[1], result.returncode, status))
            if result.stderr:
                problems.append("%s: printed on stderr: %s" % (args[1], result.stderr))
        if printed != expected:
            problems.append("the tables differ from table_expected.txt:\n" + printed)

        missing = os.path.join(work, "none.lat")
        result = run(table + common + ["--title", "t", "--ranks", "2", "--limit", "mem", missing])
        want = "allreduce_table: cannot read %s: No such file or directory\n" % missing
        if result.returncode != 2 or result.stderr != want or result.stdout:
            problems.append("a missing log: exit %d, stderr %r"
                            % (result.returncode, result.stderr))

        result = run(table + common + ["--title", "t", "--ranks", "2", "--limit", "disk"])
        want = ("allreduce_table.py: error: --limit takes \"mem\" or \"link:SECONDS_PER_BYTE\","
                " not 'disk'\n")
        if result.returncode != 2 or not result.stderr.endswith(want):
            problems.append("--limit disk: exit %d, stderr %r" % (result.returncode, result.stderr))

        # The script itself, through the PATH's python3. Its runs come from the logs' count and
        # its cores from nproc: the exchange limit's note depends on them, so it is left out.
        result = run([os.path.join(source, "bench", "allreduce_compare.sh"), "--tables", work])
        want = "allreduce_compare: wrong elements in this host, 4 ranks (the #wrong column)\n"
        if result.returncode != 1 or result.stderr != want:
            problems.append("--tables: exit %d, stderr %r" % (result.returncode, result.stderr))

        def without_xchg_note(text):
            return [line for line in text.splitlines() if not line.startswith("  xchg-limit:")]

        tables = expected[: expected.index("\n== 2 hosts")]
        if without_xchg_note(result.stdout) != without_xchg_note(tables):
            problems.append("--tables printed:\n" + result.stdout)

    for problem in problems:
        print("bench.allreduce_table: " + problem, file=sys.stderr)
    if not problems:
        print("bench.allreduce_table: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    sys.exit(main(sys.argv[1]))
