#!/usr/bin/env python3
"""`ddlrun --dry-run --output svg` end to end, with a real SVG renderer.

For Summit plans made offline from the committed AC922 recording (2 hosts; 36 hosts in two racks;
72 hosts in four racks, drawn one box per rack) and a plan whose legend holds XML's special
characters: the SVG must parse as XML, convert to PNG with rsvg-convert (Debian's librsvg2-bin,
installed by scripts/setup), and hold every rank, every host and a path per ring edge (per pair
of racks in the summary), checked against the same plan as JSON. First, the README's picture,
docs/summit-2host.svg, must be what ddlrun draws now (no renderer needed for that).

  check_svg.py DDLRUN SOURCE_DIR            check
  check_svg.py DDLRUN SOURCE_DIR --update   rewrite docs/summit-2host.svg (scripts/update-golden)

Without rsvg-convert it says so and exits 77 (CTest: skipped) after that first check, except
under CI (CI=true), where a missing renderer is a failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
# The README's command, run from the top of the repository (DDLRUN stands for build/ddlrun/ddlrun).
README_COMMAND = ("ddlrun --dry-run --output svg --host-xml '*=tests/topologies/summit-ac922.xml' "
                  "-H 'node[01-02]' python train.py > docs/summit-2host.svg")
README_ARGS = ["--dry-run", "--output", "svg", "--host-xml", "*=tests/topologies/summit-ac922.xml",
               "-H", "node[01-02]", "python", "train.py"]
PICTURE = "docs/summit-2host.svg"


def ddlrun(binary, args, cwd):
    done = subprocess.run([binary] + args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: ddlrun {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def texts(root):
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def titles(root):
    return [t.text or "" for t in root.iter(SVG + "title")]


def render(svg_path, png_path):
    done = subprocess.run(["rsvg-convert", svg_path, "-o", png_path], capture_output=True,
                          text=True)
    if done.returncode != 0 or done.stderr.strip():
        sys.exit(f"FAIL: rsvg-convert {svg_path}: exit {done.returncode}: {done.stderr}")
    with open(png_path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            sys.exit(f"FAIL: rsvg-convert wrote no PNG for {svg_path}")


def ring_edges(plan):
    """(dim, ring, from rank, to rank) of every ring of two or more ranks."""
    for d, rings in enumerate(plan["rings"]):
        for k, ring in enumerate(rings):
            if len(ring) > 1:
                for i, a in enumerate(ring):
                    yield d, k, a, ring[(i + 1) % len(ring)]


def check_detailed(name, root, plan):
    shown = set(texts(root))
    found = set(titles(root))
    for p in plan["placement"]:
        if f"rank {p['rank']}" not in shown:
            sys.exit(f"FAIL {name}: no text 'rank {p['rank']}'")
    for h in plan["hosts"]:
        first, last = h["ranks"][0], h["ranks"][-1]
        if f"host {h['name']}: ranks {first}-{last}" not in found:
            sys.exit(f"FAIL {name}: no host {h['name']} with ranks {first}-{last}")
    paths = [t for t in found if t.startswith("dim ")]
    expected = {f"dim {d} ring {k}: rank {a} -> rank {b}" for d, k, a, b in ring_edges(plan)}
    if set(paths) != expected or len(paths) != len(expected):
        sys.exit(f"FAIL {name}: {len(paths)} ring paths, expected {len(expected)}; "
                 f"missing e.g. {sorted(expected - set(paths))[:3]}")
    return f"{len(plan['placement'])} ranks, {len(plan['hosts'])} hosts, {len(paths)} ring edges"


def check_summary(name, root, plan, per_rack):
    rack_of = {h["name"]: i // per_rack for i, h in enumerate(plan["hosts"])}
    host_of = {p["rank"]: p["host"] for p in plan["placement"]}
    racks = [t for t in titles(root) if re.match(r"rack \d+: ", t)]
    named = {n for t in racks for n in t.split(": ", 1)[1].split(", ")}
    if named != set(rack_of):
        sys.exit(f"FAIL {name}: racks name {len(named)} hosts, the plan has {len(rack_of)}")
    covered = []
    for t in texts(root):
        m = re.match(r"rack \d+: \d+ hosts, ranks (\d+)-(\d+)$", t)
        if m:
            covered += range(int(m.group(1)), int(m.group(2)) + 1)
    if sorted(covered) != [p["rank"] for p in plan["placement"]]:
        sys.exit(f"FAIL {name}: the racks' rank ranges do not cover every rank once")
    expected = {}
    for d, _, a, b in ring_edges(plan):
        ra, rb = rack_of[host_of[a]], rack_of[host_of[b]]
        if ra != rb:
            expected[(d, ra, rb)] = expected.get((d, ra, rb), 0) + 1
    want = {f"dim {d}: {n} ring edges from rack {a + 1} to rack {b + 1}"
            for (d, a, b), n in expected.items()}
    got = {t for t in titles(root) if t.startswith("dim ")}
    if got != want:
        sys.exit(f"FAIL {name}: paths between racks {sorted(got)[:4]}, expected {sorted(want)[:4]}")
    return f"{len(racks)} racks, {len(named)} hosts, {len(got)} paths between racks"


def check_case(binary, work, name, args, per_rack=None):
    svg = ddlrun(binary, ["--dry-run", "--output", "svg"] + args, work)
    plan = json.loads(ddlrun(binary, ["--dry-run", "--output", "json"] + args, work))
    svg_path = os.path.join(work, name + ".svg")
    with open(svg_path, "w") as f:
        f.write(svg)
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as e:
        sys.exit(f"FAIL {name}: not well-formed XML: {e}")
    render(svg_path, os.path.join(work, name + ".png"))
    what = check_summary(name, root, plan, per_rack) if per_rack else check_detailed(
        name, root, plan)
    print(f"ok {name}: rendered; {what}")
    return root


def check_escaping(binary, work):
    conf = os.path.join(work, "racks & <switches>.conf")
    with open(conf, "w") as f:
        f.write("SwitchName=s1 Nodes=node[01-02]\n")
    root = check_case(binary, work, "escaped", ["--host-xml", "*=topologies/summit-ac922.xml", "-H",
                                                "node[01-02]", "--topology-conf", conf, "prog"])
    if not any(conf in t for t in texts(root)):
        sys.exit(f"FAIL escaped: the legend does not show {conf!r} as text")


def check_readme_picture(binary, source, update):
    svg = ddlrun(binary, README_ARGS, source)
    path = os.path.join(source, PICTURE)
    if update:
        with open(path, "w") as f:
            f.write(svg)
        print(f"rewrote {PICTURE}")
        return
    with open(os.path.join(source, "README.md")) as f:
        if README_COMMAND not in f.read():
            sys.exit(f"FAIL: README.md does not show the command that draws {PICTURE}:\n"
                     f"  {README_COMMAND}")
    with open(path) as f:
        if f.read() != svg:
            sys.exit(f"FAIL: {PICTURE} differs from what ddlrun draws now; run scripts/update-golden "
                     "and commit it")
    print(f"ok {PICTURE} is what ddlrun draws now")


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--update"]):
        sys.exit(f"usage: {sys.argv[0]} DDLRUN SOURCE_DIR [--update]")
    binary, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3:] == ["--update"]:
        return check_readme_picture(binary, source, True)
    check_readme_picture(binary, source, False)
    if not shutil.which("rsvg-convert"):
        why = ("rsvg-convert is not installed (Debian package librsvg2-bin; scripts/setup installs "
               "it), so the pictures cannot be rendered")
        if os.environ.get("CI"):
            print(f"FAIL: {why}; CI must render them")
            return 1
        print(f"SKIPPED: {why}")
        return 77
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(source, "tests", "topologies"), os.path.join(work, "topologies"))
        xml = ["--host-xml", "*=topologies/summit-ac922.xml"]
        check_case(binary, work, "summit-2", xml + ["-H", "node[01-02]", "prog"])
        check_case(binary, work, "summit-36", xml + ["-H", "node[01-36]", "--nodes", "18", "prog"])
        check_case(binary, work, "summit-72", xml + ["-H", "node[01-72]", "--nodes", "18", "prog"],
                   per_rack=18)
        check_escaping(binary, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
