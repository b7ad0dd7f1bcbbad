#!/usr/bin/env python3
"""allreduce_compare.sh's comparison table of one setting, from its benchmarks' logs.

How it works: every log is named BENCHMARK.RUN.PHASE (ddl.1.sweep, mpi4.2.lat, memcpy.1.sweep)
and holds nccl-tests' rows (size count type redop time algbw busbw #wrong; torch's script leaves
out type and redop, memcpy_bench prints size, rate and three more). The rows are joined by
benchmark and size; each cell is the median over the runs. The limits come from memcpy_bench's
copy rate R and exchange rate X of this host ("mem") or from the links' floor time per byte
("link:SECONDS"); bench/README.md derives them. Under the table: the limits' formulas, the
8-byte latency of each benchmark, on links the 16 MiB times against the floor, and every size
at which a benchmark found wrong elements.

Usage: allreduce_table.py --title T --type TYPE --runs N --ranks N --cores N --limit LIMIT
                          [--have-gloo] [--torch-version V] LOG...
Exit status: 0, 1 when some benchmark found wrong elements, 2 on bad usage or an unreadable log.
"""

import argparse
import os
import sys

from benchtable import Table, awk_string, divide, median, number

LATENCY_SIZE = "8"
NET_SIZE = "16777216"  # the 16 MiB row of the settings on links
FORCED_ALGORITHMS = ["mpi%d" % a for a in range(1, 7)]


class Logs:
    """Every benchmark's rows of one setting: times (us) and busbw (GB/s) by benchmark and size."""

    def __init__(self):
        self.times, self.busbw, self.wrong = {}, {}, {}
        self.rates, self.exchange = {}, {}  # memcpy_bench's R and X by size (GB/s)
        self.benchmarks, self.sizes = set(), []
        self.bad = {}  # size -> the benchmarks whose check found wrong elements, in log order

    def read(self, path):
        benchmark = os.path.basename(path).split(".")[0]
        with open(path, encoding="utf-8", errors="replace") as log:
            for line in log:
                self._add(benchmark, line.split())

    def _add(self, benchmark, fields):
        if not fields or not (fields[0].isascii() and fields[0].isdigit()):
            return  # comments, headers, whatever else the ranks printed
        if benchmark in ("memcpy", "xchg") and len(fields) == 5:
            rates = self.rates if benchmark == "memcpy" else self.exchange
            rates.setdefault(fields[0], []).append(number(fields[2]))
            return
        if benchmark == "torch" and len(fields) == 6:  # size count time algbw busbw wrong
            fields = fields[:2] + ["float32", "sum"] + fields[2:]
        if len(fields) != 8:
            return
        size, key = fields[0], (benchmark, fields[0])
        self.benchmarks.add(benchmark)
        if size not in self.sizes:
            self.sizes.append(size)
        self.times.setdefault(key, []).append(number(fields[4]))
        self.busbw.setdefault(key, []).append(number(fields[6]))
        wrong = number(fields[7])
        self.wrong[key] = max(wrong, self.wrong.get(key, wrong))
        if wrong != 0:
            self.bad.setdefault(size, []).append(benchmark)

    def has(self, benchmark, size):
        return (benchmark, size) in self.busbw

    def bw(self, benchmark, size):
        return median(self.busbw[benchmark, size])

    def time(self, benchmark, size):
        return median(self.times[benchmark, size])

    def best_forced(self, size):
        """The forced MPI algorithm with the highest busbw at size ("mpi4"), or None."""
        best, best_bw = None, -1
        for benchmark in FORCED_ALGORITHMS:
            if self.has(benchmark, size) and self.bw(benchmark, size) > best_bw:
                best, best_bw = benchmark, self.bw(benchmark, size)
        return best

    def most_wrong(self, size):
        return max([0] + [w for (_, s), w in self.wrong.items() if s == size])


class Limits:
    """The busbw (GB/s) no allreduce of a kind beats at a size, or -1 where there is none."""

    def __init__(self, logs, ranks, limit):
        self.logs, self.n = logs, ranks
        self.memory = limit == "mem"
        self.seconds_per_byte = 0.0 if self.memory else number(limit[len("link:") :])

    def copy(self, size):
        """Through shared slots: S(5 - 3/n) bytes moved per rank; on links, the links' floor."""
        if not self.memory:
            return 2 * (self.n - 1) / self.n / self.seconds_per_byte / 1e9
        r = self._rate(size)
        return -1 if r is None else 4 * (self.n - 1) * r / (5 * self.n - 3) / 1e9

    def one_pass(self, size):
        """Every input read once, every output written once: one memcpy of S per rank."""
        r = self._rate(size)
        return -1 if r is None else 2 * (self.n - 1) / self.n * r / 1e9

    def slot(self, size):
        """Through slots with private buffers: S(5 - 2/n) bytes moved per rank."""
        r = self._rate(size)
        return -1 if r is None else 4 * (self.n - 1) * r / (5 * self.n - 2) / 1e9

    def exchange(self, size):
        """What one rank takes in from other cores while all do (from 64 KiB up)."""
        if size not in self.logs.exchange or int(size) < 65536:
            return -1
        return median(self.logs.exchange[size])

    def _rate(self, size):
        if not self.memory or size not in self.logs.rates:
            return None
        return median(self.logs.rates[size]) * 1e9  # bytes per second


class Cells:
    """The text of each kind of cell at a size: a busbw, a ratio, a limit, a share."""

    def __init__(self, logs, have_gloo):
        self.logs, self.have_gloo = logs, have_gloo

    def absent(self, benchmark):
        """Not run here at all (n/a), rather than run without a row ("-")."""
        if benchmark == "gloo":
            return not self.have_gloo
        return benchmark == "torch" and "torch" not in self.logs.benchmarks

    def busbw(self, benchmark):
        def text(size):
            if benchmark not in self.logs.benchmarks:
                return "n/a" if self.absent(benchmark) else "-"
            return "%.4f" % self.logs.bw(benchmark, size) if self.logs.has(benchmark, size) else "-"

        return text

    def best(self, size):
        best = self.logs.best_forced(size)
        return "n/a" if best is None else "%.4f(%s)" % (self.logs.bw(best, size), best[3:])

    def over(self, benchmark, size):
        """ddl's busbw over the other's, as time over time (which keeps more digits)."""
        logs = self.logs
        if benchmark is None:
            return "n/a"
        if not (logs.has("ddl", size) and logs.has(benchmark, size)) or logs.time("ddl", size) <= 0:
            return "n/a" if self.absent(benchmark) else "-"
        return "%.2f" % (logs.time(benchmark, size) / logs.time("ddl", size))

    def ratio(self, benchmark):
        return lambda size: self.over(benchmark, size)

    def best_ratio(self, size):
        return self.over(self.logs.best_forced(size), size)

    @staticmethod
    def limit(kind):
        return lambda size: "-" if kind(size) < 0 else "%.4f" % kind(size)

    def share(self, kind, benchmark="ddl"):
        def text(size):
            whole = kind(size)
            if whole <= 0 or not self.logs.has(benchmark, size):
                return "-"
            return "%.0f%%" % (100 * self.logs.bw(benchmark, size) / whole)

        return text


def comparison(logs, limits, have_gloo):
    """The table's columns, each (title, width, cell of a size); None for a column left out."""
    c = Cells(logs, have_gloo)
    present, mem = logs.benchmarks, limits.memory
    base, shared, flat = "ddlbase" in present, "ddlshared" in present, "ddlflat" in present
    return [
        ("size(B)", 10, lambda size: size),
        ("ddl", 9, c.busbw("ddl")),
        ("ddl-base", 9, c.busbw("ddlbase")) if base else None,
        ("ddl-shared", 10, c.busbw("ddlshared")) if shared else None,
        ("ddl-flat", 9, c.busbw("ddlflat")) if flat else None,
        ("mpi-tuned", 9, c.busbw("mpi")),
        ("mpi-best(N)", 12, c.best),
        ("mpi-untuned", 11, c.busbw("mpiu")),
        ("gloo", 9, c.busbw("gloo")),
        ("torch-gloo", 10, c.busbw("torch")),
        ("copy-limit" if mem else "link-limit", 10, c.limit(limits.copy)),
        ("1pass-limit", 11, c.limit(limits.one_pass)) if mem else None,
        ("slot-limit", 10, c.limit(limits.slot)) if mem else None,
        ("xchg-limit", 10, c.limit(limits.exchange)) if mem else None,
        ("ddl/base", 8, c.ratio("ddlbase")) if base else None,
        ("ddl/tuned", 9, c.ratio("mpi")),
        ("ddl/best", 8, c.best_ratio),
        ("ddl/gloo", 8, c.ratio("gloo")),
        ("ddl/torch", 9, c.ratio("torch")),
        ("ddl%copy", 8, c.share(limits.copy)) if mem else ("ddl%lim", 7, c.share(limits.copy)),
        ("ddl%1pass", 9, c.share(limits.one_pass)) if mem else None,
        ("ddl%slot", 8, c.share(limits.slot)) if mem else None,
        ("ddl%xchg", 8, c.share(limits.exchange)) if mem else None,
        ("shr%1pass", 9, c.share(limits.one_pass, "ddlshared")) if shared and mem else None,
        ("#wrong", 6, lambda size: awk_string(logs.most_wrong(size))),
    ]


def limit_notes(limits, n, cores, torch_name, has_torch):
    """The lines under the table that give each limit's formula."""
    if not limits.memory:
        ms_per_mib = limits.seconds_per_byte * 1048576 * 1e3
        return [
            "  link-limit: busbw at the floor time (%.3f ms per MiB: the busiest link carrying"
            " its least); tc lets the first 1 MB of a burst through unshaped, so it binds from"
            " ~1 MiB up"
            % ms_per_mib
        ]
    notes = [
        "  copy-limit: an allreduce through shared slots moves S(5-3/n) bytes per rank, a memcpy"
        " 2S: busbw = 4(n-1)/(5n-3) x copy rate R of %d processes at once (memcpy_bench)" % n,
        "  1pass-limit: every input read once, every output written once (2S per rank, one"
        " memcpy): busbw = 2(n-1)/n x R",
        "  slot-limit: through slots with private buffers the reduced slice is written twice"
        " (output and slot): S(5-2/n) per rank, busbw = 4(n-1)/(5n-2) x R",
    ]
    if n <= cores:
        notes.append(
            "  xchg-limit: with private buffers every rank takes in 2(n-1)/n S bytes other cores"
            " just wrote: busbw = X, the rate one rank takes them in while all do (memcpy_bench"
            " -x; from 64 KiB up)"
        )
    else:
        notes.append(
            "  xchg-limit: not measured: %d ranks outnumber the %d cores (ranks that share a core"
            " hand bytes over in its cache, and the exchange measures their turns)" % (n, cores)
        )
    if has_torch:
        notes.append("  torch-gloo: %s" % torch_name)
    return notes


def latency_line(logs):
    """The 8-byte time (us) of each benchmark, or None without ddl's."""
    size = LATENCY_SIZE
    if not logs.has("ddl", size):
        return None
    ddl = logs.time("ddl", size)
    line = "  8 B latency (us): ddl %.1f" % ddl
    ddl_variants = (("ddlbase", "ddl-base"), ("ddlshared", "ddl-shared"), ("ddlflat", "ddl-flat"))
    for benchmark, label in ddl_variants:
        if logs.has(benchmark, size):
            line += ", %s %.1f" % (label, logs.time(benchmark, size))
    if logs.has("mpi", size):
        mpi = logs.time("mpi", size)
        line += ", mpi-tuned %.1f (ddl/mpi-tuned %.2f)" % (mpi, divide(mpi, ddl))
    best = logs.best_forced(size)
    if best is not None:
        line += ", mpi-best(%s) %.1f" % (best[3:], logs.time(best, size))
    for benchmark, label in (("mpiu", "mpi-untuned"), ("gloo", "gloo"), ("torch", "torch-gloo")):
        if logs.has(benchmark, size):
            line += ", %s %.1f" % (label, logs.time(benchmark, size))
    return line


def floor_line(logs, limits):
    """On links: each benchmark's ms at 16 MiB and the floor's share of it."""
    if not logs.has("ddl", NET_SIZE):
        return "  16 MiB: no row (--net-max below 16M?)"
    floor_ms = int(NET_SIZE) * limits.seconds_per_byte * 1e3
    line = "  16 MiB: floor %.0f ms; ms (floor/time):" % floor_ms
    best = logs.best_forced(NET_SIZE)
    order = [("ddl", "ddl"), ("ddlflat", "ddl-flat"), ("mpi", "mpi-tuned")]
    if best is not None:
        order.append((best, "mpi-best(%s)" % best[3:]))
    order += [("mpiu", "mpi-untuned"), ("gloo", "gloo")]
    for benchmark, label in order:
        if logs.has(benchmark, NET_SIZE):
            ms = logs.time(benchmark, NET_SIZE) / 1e3
            line += " %s %.0f (%.0f%%)" % (label, ms, divide(100 * floor_ms, ms))
    return line


def print_table(args, logs):
    """Prints the table and its notes; returns the sizes at which elements were wrong."""
    limits = Limits(logs, args.ranks, args.limit)
    table = Table(comparison(logs, limits, args.have_gloo))
    sizes = sorted(logs.sizes, key=number)
    torch_name = "torch-gloo"
    if args.torch_version:
        torch_name += " (torch %s)" % args.torch_version
    print()
    print("== %s: allreduce %s sum, busbw GB/s, median of %s run(s)"
          % (args.title, args.type, args.runs))
    print(table.header())
    for size in sizes:
        print(table.row(size))
    if not sizes:
        print("  (no rows: every benchmark failed)")
    for note in limit_notes(limits, args.ranks, args.cores, torch_name, "torch" in logs.benchmarks):
        print(note)
    latency = latency_line(logs)
    if latency:
        print(latency)
    if not limits.memory:
        print(floor_line(logs, limits))
    wrong = [size for size in sizes if size in logs.bad]
    for size in wrong:
        print("  wrong elements at %s bytes: %s" % (size, " ".join(logs.bad[size])))
    return wrong


def main(argv):
    parser = argparse.ArgumentParser(prog="allreduce_table.py", description=__doc__.splitlines()[0])
    parser.add_argument("--title", required=True)
    parser.add_argument("--type", required=True, help="the element type, for the title line")
    parser.add_argument("--runs", required=True, help="runs per benchmark, for the title line")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--limit", required=True, help='"mem" or "link:SECONDS_PER_BYTE"')
    parser.add_argument("--have-gloo", action="store_true", help="gloo_allreduce_bench was built")
    parser.add_argument("--torch-version", default="")
    parser.add_argument("logs", nargs="*")
    args = parser.parse_args(argv)
    if args.limit != "mem" and not args.limit.startswith("link:"):
        parser.error('--limit takes "mem" or "link:SECONDS_PER_BYTE", not %r' % args.limit)

    logs = Logs()
    for path in args.logs:
        try:
            logs.read(path)
        except OSError as error:
            print("allreduce_table: cannot read %s: %s" % (path, error.strerror), file=sys.stderr)
            return 2
    return 1 if print_table(args, logs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
