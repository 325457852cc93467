#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""tests/expected/matrix_judge.py RESULTS [EXPECTED]: judge the matrix's records
(results.json, as qemu/lib/matrix.py assembles it) against the rules of
tests/expected/matrix.tsv (EXPECTED's default): print each cell that differs and
"matrix check: N passed, M failed"; exit 1 when one differs (make matrix-check).

The expectations of a cell follow from its target, the version that target reports
and the kernel's page size, never from which kernel it is: the stock target before
1.30.0 takes the `stock` rules of matrix.tsv (4096 at most, the 16-bit truncation),
at 1.30.0 or later the `stock-1.30` ones (up to the page size). A kernel of the rig
has its stock target's version pinned by the `version` lines for its series; a
kernel given by its build tree's path (make matrix KERNEL=PATH) reports its own."""

import json
import re
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(TOP / "qemu/lib"))
from matrix import ARGS, from_tree  # noqa: E402  (the records' own module)

# The first version of the crypt target that takes sector sizes up to the page size.
LARGE_SECTORS = (1, 30, 0)


def _version(text):
    """A target version as a tuple of numbers, () when it is not one."""
    return tuple(int(p) for p in text.split(".")) if re.fullmatch(r"[0-9]+(\.[0-9]+)*", text) else ()


def rules_of(rec):
    """Which rules of matrix.tsv a record is held to: ours always to its own; the
    stock target by the version it reports."""
    if rec["target"] == "stock" and _version(rec["target_version"]) >= LARGE_SECTORS:
        return "stock-1.30"
    return rec["target"]


def check(results, expected):
    """Compare every cell with the rules in the expectation file; print each
    difference and return (cells checked, cells that differ)."""
    rules = []
    versions = {}
    for line in Path(expected).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("version "):
            # version TARGET SERIES VERSION: the target's version on every kernel
            # of that series (the series of kernel_release: 7.2 of 7.2.13-...)
            _, target, series, version = line.split()
            versions[(target, series)] = version
            continue
        rules.append(line.split())
    records = json.loads(Path(results).read_text())
    seen = set()
    bad = set()

    def expect(rec):
        for target, page, arg, outcome, recorded, lbs, version, err in rules:
            if target == rules_of(rec) and page in ("*", str(rec["page_size"])) and arg == rec["sector_size"]:
                return outcome, recorded, lbs, version, err
        return None

    for rec in records:
        where = f"{rec['kernel']} {rec['target']} sector_size:{rec['sector_size']}"
        cell = (rec["kernel"], rec["target"], rec["sector_size"])
        seen.add(cell)
        exp = expect(rec)
        if exp is None:
            print(f"MISMATCH {where}: no expectation for this cell")
            bad.add(cell)
            continue
        outcome, recorded, lbs, version, err = exp
        observed = (rec["outcome"], str(rec["recorded"]) if rec["recorded"] is not None else "-",
                    str(rec["logical_block_size"]) if rec["logical_block_size"] is not None else "-")
        if observed != (outcome, recorded, lbs):
            print(f"MISMATCH {where}: expected outcome={outcome} recorded={recorded} "
                  f"logical_block_size={lbs}, observed outcome={observed[0]} recorded={observed[1]} "
                  f"logical_block_size={observed[2]}")
            bad.add(cell)
        if version == "*" and not from_tree(rec["kernel"]):
            series = re.match(r"[0-9]+[.][0-9]+", rec["kernel_release"])
            version = versions.get((rec["target"], series.group(0) if series else None), "*")
        if version != "*" and rec["target_version"] != version:
            print(f"MISMATCH {where}: expected target version {version}, observed {rec['target_version']}")
            bad.add(cell)
        if rec.get("agrees") is False:
            print(f"MISMATCH {where}: lbscrypt's predict() does not say what the kernel did")
            bad.add(cell)
        if err == "names-arg" and (rec["error"] is None or rec["sector_size"] not in rec["error"]):
            print(f"MISMATCH {where}: the ti->error must name the value {rec['sector_size']!r}, "
                  f"observed {rec['error']!r}")
            bad.add(cell)
    # Every kernel and target that ran must have every argument.
    for kernel, target in {(k, t) for k, t, _ in seen}:
        for arg in ARGS:
            if (kernel, target, arg) not in seen:
                print(f"MISMATCH {kernel} {target} sector_size:{arg}: no result")
                bad.add((kernel, target, arg))
    return len(seen | bad), len(bad)


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: tests/expected/matrix_judge.py RESULTS [EXPECTED]", file=sys.stderr)
        return 2
    expected = argv[2] if len(argv) == 3 else str(TOP / "tests/expected/matrix.tsv")
    cells, bad = check(argv[1], expected)
    print(f"matrix check: {cells - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
