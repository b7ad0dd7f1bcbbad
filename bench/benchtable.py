#!/usr/bin/env python3
"""The bench scripts' arithmetic and columns: medians, ratios, shares and aligned tables.

Imported by the table printers (allreduce_table.py) and run from the shell scripts, where it
replaces a small awk program each. Python 3 standard library only, so that Debian's
/usr/bin/python3 and any venv's python3 run it alike.

Usage from a shell script (numbers on stdin: whitespace-separated, a leading number of each
word as awk reads it, so "12ms" is 12):
  benchtable.py stats [--scale K] [--format F]    "MEDIAN MIN" of the numbers times K (1e-6, 1/100)
  benchtable.py median [--scale K] [--format F]   the median alone, "-" when there is none
  benchtable.py ratio A B [--format F]            A / B (default format "%.2fx")
  benchtable.py share PART WHOLE                  PART / WHOLE as a whole percentage ("37%")
F is a printf format of one number (default "%g"). Exit status 2 on bad usage.
"""

import argparse
import math
import re
import sys
from fractions import Fraction

_LEADING_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def number(text):
    """The leading number of text as awk reads it ("12abc" is 12, "abc" is 0)."""
    match = _LEADING_NUMBER.match(text)
    return float(match.group(0)) if match else 0.0


def median(values):
    """The median of values (the mean of the middle two when their count is even), or None."""
    ordered = sorted(values)
    count = len(ordered)
    if count == 0:
        return None
    if count % 2:
        return ordered[count // 2]
    return (ordered[count // 2 - 1] + ordered[count // 2]) / 2


def divide(a, b):
    """a / b, with IEEE's answer (inf, -inf or nan) where b is 0, as awk gives it."""
    if b != 0:
        return a / b
    return math.nan if a == 0 else math.copysign(math.inf, a)


def ratio(a, b, fmt="%.2f"):
    """a / b in fmt, or "-" when b is not positive."""
    return "-" if b <= 0 else fmt % (a / b)


def share(part, whole):
    """part as a whole percentage of whole ("37%"), or "-" when whole is not positive."""
    return "-" if whole <= 0 else "%.0f%%" % (100 * part / whole)


def awk_string(value):
    """value as Debian's awk (mawk) prints a number with %s: an int's digits, else %.6g."""
    if float(value).is_integer() and -(2**31) <= value < 2**31:
        return str(int(value))
    return "%.6g" % value


class Table:
    """Right-aligned columns of fixed widths, one space apart, printed as they come.

    Each column is (title, width, cell): cell(row) gives the column's text for a row. A cell
    wider than its column pushes the rest of its line right (as printf's %Ns does).
    """

    def __init__(self, columns):
        self.columns = [column for column in columns if column is not None]

    def header(self):
        return self._line(title for title, _, _ in self.columns)

    def row(self, key):
        return self._line(cell(key) for _, _, cell in self.columns)

    def _line(self, cells):
        widths = (width for _, width, _ in self.columns)
        return " ".join("%*s" % (width, text) for width, text in zip(widths, cells))


def _read_numbers(stream):
    return [number(word) for word in stream.read().split()]


def _main(argv):
    parser = argparse.ArgumentParser(prog="benchtable.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("stats", "median"):
        command = commands.add_parser(name)
        command.add_argument("--scale", type=lambda text: float(Fraction(text)), default=1.0)
        command.add_argument("--format", default="%g")
    command = commands.add_parser("ratio")
    command.add_argument("a", type=float)
    command.add_argument("b", type=float)
    command.add_argument("--format", default="%.2fx")
    command = commands.add_parser("share")
    command.add_argument("part", type=float)
    command.add_argument("whole", type=float)
    args = parser.parse_args(argv)

    if args.command in ("stats", "median"):
        values = [value * args.scale for value in _read_numbers(sys.stdin)]
        middle = median(values)
        if middle is None:
            print("-" if args.command == "median" else "- -")
        elif args.command == "median":
            print(args.format % middle)
        else:
            print(args.format % middle, args.format % min(values))
    elif args.command == "ratio":
        print(args.format % divide(args.a, args.b))
    else:
        print(share(args.part, args.whole))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
