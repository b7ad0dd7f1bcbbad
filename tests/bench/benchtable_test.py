#!/usr/bin/env python3
"""bench.benchtable: bench/benchtable.py's functions and its command line (the form the shell
scripts call), under this interpreter and under the PATH's python3 when that is another.

Usage: benchtable_test.py SOURCE_DIR
"""

import math
import os
import shutil
import subprocess
import sys
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
SCRIPT = os.path.join(SOURCE, "bench", "benchtable.py")
sys.path.insert(0, os.path.join(SOURCE, "bench"))

import benchtable  # noqa: E402


class Functions(unittest.TestCase):
    def test_median_of_odd_and_even_counts(self):
        self.assertIsNone(benchtable.median([]))
        self.assertEqual(benchtable.median([5.0]), 5.0)
        self.assertEqual(benchtable.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(benchtable.median([4.0, 1.0, 3.0, 2.0]), 2.5)

    def test_number_reads_the_leading_number_as_awk(self):
        self.assertEqual(benchtable.number("12abc"), 12.0)
        self.assertEqual(benchtable.number("abc"), 0.0)
        self.assertEqual(benchtable.number("1.5e3"), 1500.0)
        self.assertEqual(benchtable.number("-2.25"), -2.25)
        self.assertEqual(benchtable.number(".5"), 0.5)

    def test_ratio_and_share_say_dash_without_a_positive_whole(self):
        self.assertEqual(benchtable.ratio(3, 2), "1.50")
        self.assertEqual(benchtable.ratio(3, 2, "%.1fx"), "1.5x")
        self.assertEqual(benchtable.ratio(3, 0), "-")
        self.assertEqual(benchtable.share(1, 3), "33%")
        self.assertEqual(benchtable.share(5, 4), "125%")
        self.assertEqual(benchtable.share(1, 0), "-")

    def test_divide_by_zero_gives_ieee_values(self):
        self.assertEqual(benchtable.divide(1, 0), math.inf)
        self.assertEqual(benchtable.divide(-1, 0), -math.inf)
        self.assertTrue(math.isnan(benchtable.divide(0, 0)))
        self.assertEqual(benchtable.divide(3, 4), 0.75)

    def test_awk_string_prints_numbers_as_mawk(self):
        self.assertEqual(benchtable.awk_string(0.0), "0")
        self.assertEqual(benchtable.awk_string(12.0), "12")
        self.assertEqual(benchtable.awk_string(0.5), "0.5")
        self.assertEqual(benchtable.awk_string(2147483648.0), "2.14748e+09")

    def test_table_right_aligns_and_skips_absent_columns(self):
        columns = [("size", 6, lambda k: k), None, ("x", 4, lambda k: k * 2)]
        table = benchtable.Table(columns + [("long", 2, lambda k: "xyz")])
        self.assertEqual(table.header(), "  size    x long")
        self.assertEqual(table.row("8"), "     8   88 xyz")


class CommandLine(unittest.TestCase):
    def interpreters(self):
        found = [sys.executable]
        other = shutil.which("python3")
        if other and os.path.realpath(other) != os.path.realpath(sys.executable):
            found.append(other)
        return found

    def run_script(self, python, args, stdin=""):
        return subprocess.run([python, SCRIPT] + args, input=stdin, capture_output=True,
                              text=True, check=False)

    def test_every_command(self):
        cases = [
            (["stats", "--scale", "1e-6", "--format", "%.1f"], "3e6\n1000000 2000000\n4000000\n",
             "2.5 1.0\n"),
            (["stats"], "", "- -\n"),
            (["median", "--format", "%.2f"], "0.3 0.1 0.2", "0.20\n"),
            (["median", "--scale", "1/100", "--format", "%.2f"], "250 150", "2.00\n"),
            (["median"], "", "-\n"),
            (["ratio", "3", "2"], "", "1.50x\n"),
            (["ratio", "1", "0"], "", "infx\n"),
            (["share", "1", "4"], "", "25%\n"),
        ]
        for python in self.interpreters():
            for args, stdin, want in cases:
                with self.subTest(python=python, args=args):
                    result = self.run_script(python, args, stdin)
                    got = (result.returncode, result.stdout, result.stderr)
                    self.assertEqual(got, (0, want, ""))

    def test_bad_usage_exits_2(self):
        result = self.run_script(sys.executable, ["ratio", "3"])
        self.assertEqual(result.returncode, 2)
        self.assertIn("the following arguments are required: b", result.stderr)


if __name__ == "__main__":
    unittest.main()
