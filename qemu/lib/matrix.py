#!/usr/bin/env python3
"""The matrix's records: assemble the guests' MATRIX lines into results.json
and print the table (make matrix). Judging them against the rules of
tests/expected/matrix.tsv is tests/expected/matrix_judge.py's (make matrix-check).

A MATRIX line carries one JSON record of `lbscrypt matrix --json` (tests/guest/halves/matrix.sh);
the tab-separated fields of the shell loop that preceded it are still read:
  MATRIX <target> <arg> <outcome> <recorded> <logical_block_size> <version> <error>
Each kernel's raw files, written by qemu/matrix: NAME.meta (kernel, arch, page size,
release), NAME.tsv (the MATRIX lines) and NAME.targets (target and version, as the
guest's `dmsetup targets` shows them: every record's version must be that).
"""

import json
import sys
from pathlib import Path

ARGS = ["512", "1024", "2048", "4096", "8192", "16384", "32768", "65536",
        "131072", "69632", "3000", "0", "61440", "-4096", "4096abc", "+4096"]


# The names the matrix boot registers the targets under (qemu/matrix).
TARGETS = {"crypt": "stock", "crypt_lbs": "lbscrypt"}


def _int_or_none(text):
    return None if text == "-" else int(text)


def _parse_line(line):
    """One MATRIX line as (dm target name, the record's cell fields)."""
    _, rest = line.split("\t", 1)
    if rest.startswith("{"):
        rec = json.loads(rest)
        return rec["target"], {
            "target_version": rec["target_version"], "sector_size": rec["sector_size"],
            "outcome": rec["outcome"], "recorded": rec["recorded"],
            "logical_block_size": rec["logical_block_size"], "error": rec["error"],
            "agrees": rec["agrees"],
        }
    name, arg, outcome, recorded, lbs, version, error = rest.split("\t")
    return name, {
        "target_version": version.lstrip("v"), "sector_size": arg, "outcome": outcome,
        "recorded": _int_or_none(recorded), "logical_block_size": _int_or_none(lbs),
        "error": None if error == "-" else error, "agrees": None,
    }


def _reported(path):
    """The versions of NAME.targets: {dm target name: version}."""
    if not path.exists():
        raise SystemExit(f"{path}: missing (the guest's dmsetup targets versions)")
    return dict(line.split("\t") for line in path.read_text().splitlines() if line)


def assemble(raw_dir, out):
    records = []
    for meta in sorted(Path(raw_dir).glob("*.meta")):
        kernel, arch, page, release = meta.read_text().rstrip("\n").split("\t")
        reported = _reported(meta.with_suffix(".targets"))
        for line in meta.with_suffix(".tsv").read_text().splitlines():
            name, cell = _parse_line(line)
            if reported.get(name) != cell["target_version"]:
                raise SystemExit(
                    f"{kernel}: a record of target {name} says version {cell['target_version']}, "
                    f"dmsetup targets {reported.get(name, 'has no such target')}")
            records.append({
                "kernel": kernel, "arch": arch, "page_size": int(page),
                "kernel_release": release, "target": TARGETS[name], **cell,
            })
    Path(out).write_text(json.dumps(records, indent=1) + "\n")


# The table: kernels are columns, sector sizes rows, and one cell holds both
# targets, "stock/lbscrypt", so five kernels fit in 100 columns.
WIDTH = 100
LEGEND = """cell: stock/lbscrypt. ok = loaded with that sector_size; N! = loaded, but the
kernel recorded sector_size N, not the value written; EINVAL (or another error) =
refused; - = not run (lbscrypt: the module was not built for that kernel);
? after a cell = not what lbscrypt's predict() says for that kernel and target."""


def _short(rec):
    if rec is None:
        return "-"
    mark = "?" if rec.get("agrees") is False else ""
    if rec["outcome"] != "ok":
        return rec["outcome"] + mark
    if str(rec["recorded"]) != rec["sector_size"]:
        return f"{rec['recorded']}!{mark}"
    return "ok" + mark


def _cell(cells, kernel, arg):
    return "/".join(_short(cells.get((kernel, t, arg))) for t in ("stock", "lbscrypt"))


def table(results):
    records = json.loads(Path(results).read_text())
    if not records:
        print(f"{results}: no records")
        return
    kernels = []
    for rec in records:
        if rec["kernel"] not in kernels:
            kernels.append(rec["kernel"])
    cells = {(r["kernel"], r["target"], r["sector_size"]): r for r in records}
    first = {}
    for rec in records:
        first.setdefault((rec["kernel"], rec["target"]), rec)

    # What each column is: the kernel actually booted and the targets' versions.
    idw = max(len("kernel"), *(len(k) for k in kernels))
    print(f"{'kernel':<{idw}}  {'page':>5}  {'release booted (uname -r)':<28}  target versions: stock / lbscrypt")
    for k in kernels:
        any_rec = first.get((k, "stock")) or first.get((k, "lbscrypt"))
        versions = " / ".join(f"v{first[(k, t)]['target_version']}" if (k, t) in first else "-"
                              for t in ("stock", "lbscrypt"))
        print(f"{k:<{idw}}  {any_rec['page_size']:>5}  {any_rec['kernel_release']:<28}  {versions}")

    args = [a for a in ARGS if any((k, t, a) in cells for k in kernels for t in ("stock", "lbscrypt"))]
    label = "sector_size"
    width = max(len(label), *(len(a) for a in args))
    # a tree's path heads its column by the release it booted (the lines above
    # pair the two), so that the grid keeps to WIDTH
    heads = {k: first.get((k, "stock"), first.get((k, "lbscrypt")))["kernel_release"]
             if from_tree(k) else k for k in kernels}
    colw = max(len(h) for h in heads.values())
    colw = max(colw, *(len(_cell(cells, k, a)) for k in kernels for a in args)) + 2
    per_row = max(1, (WIDTH - width) // colw)
    for start in range(0, len(kernels), per_row):
        group = kernels[start:start + per_row]
        print()
        print(label.rjust(width) + "".join(heads[k].rjust(colw) for k in group))
        for arg in args:
            print(arg.rjust(width) + "".join(_cell(cells, k, arg).rjust(colw) for k in group))
    print()
    print(LEGEND)


def from_tree(kernel):
    """A kernel given by its build tree's path (make matrix KERNEL=PATH), not a rig id."""
    return kernel.startswith("/")


def main(argv):
    if len(argv) == 4 and argv[1] == "assemble":
        assemble(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "table":
        table(argv[2])
    else:
        print("usage: matrix.py assemble RAWDIR OUT | table RESULTS", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
