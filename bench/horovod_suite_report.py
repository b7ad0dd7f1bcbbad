"""The report of bench/horovod_suite.sh for one module: every rank's junit XML read, rank 0's
counts printed (passed / failed / skipped / errors, and the share of the tests that did not
skip that passed), whether the ranks disagree, and the tests that failed on any rank.

Usage: horovod_suite_report.py OUT MODULE RANKS SECONDS DDLRUN_STATUS
Exit status 1 when some rank wrote no XML (its log, OUT/MODULE.rankR.log, says why)."""

import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    """{test name: "passed" | "failed" | "error" | "skipped"} of one rank's junit XML."""
    result = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}.{case.get('name')}"
        kinds = {child.tag for child in case}
        if "error" in kinds:
            result[name] = "error"
        elif "failure" in kinds:
            result[name] = "failed"
        elif "skipped" in kinds:
            result[name] = "skipped"
        else:
            result[name] = "passed"
    return result


def main(out, module, ranks, seconds, rc):
    per_rank = []
    for r in range(int(ranks)):
        try:
            per_rank.append(outcomes(f"{out}/{module}.rank{r}.xml"))
        except (OSError, ET.ParseError) as e:
            print(f"{module}: rank {r} wrote no report ({e}); see {out}/{module}.rank{r}.log "
                  f"and {out}/{module}.ddlrun.log (ddlrun exit {rc})")
            return 1
    counts = {k: sum(1 for v in per_rank[0].values() if v == k)
              for k in ("passed", "failed", "skipped", "error")}
    ran = counts["passed"] + counts["failed"] + counts["error"]
    share = f"{100.0 * counts['passed'] / ran:.1f}%" if ran else "-"
    agree = all(p == per_rank[0] for p in per_rank[1:])
    print(f"{module}: {ranks} ranks, {seconds} s: rank 0 passed {counts['passed']}, failed "
          f"{counts['failed']}, skipped {counts['skipped']}, errors {counts['error']} "
          f"({share} of those not skipped passed); ranks "
          f"{'agree' if agree else 'DISAGREE'}; ddlrun exit {rc}")
    names = sorted({n for p in per_rank for n, v in p.items() if v in ("failed", "error")})
    for name in names:
        where = [str(r) for r, p in enumerate(per_rank) if p.get(name) in ("failed", "error")]
        print(f"  {name}: {per_rank[int(where[0])][name]} on rank{'s' if len(where) > 1 else ''} "
              f"{', '.join(where)}")
    if not agree:
        for name in sorted(set().union(*per_rank)):
            seen = [p.get(name, "absent") for p in per_rank]
            if len(set(seen)) > 1:
                print(f"  ranks differ on {name}: {', '.join(seen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
