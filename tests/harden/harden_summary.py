#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""harden_summary.py: make harden's verdict, from what its run left in OUT (build/harden).

    tests/harden/harden_summary.py OUT --splats N --status S --seconds N --tables N --seed N --kernel K
        [--parts "PART..."]

Reads the guests' console logs (OUT/*.log: the PRESSURE, FAULTS and LEAKS lines the
hardening tests print, their FAIL lines; the results of qemu/harden's own boots),
run-guest-tests' report (OUT/suite.txt), the fuzz judge's OUT/fuzz.json and the
argument fuzzer's OUT/argfuzz.json; writes OUT/summary.json and prints it. Exits 1
unless splats, leaks, verify errors, unexpected errnos, guest test failures and tool
failures are all 0, the run's status S is 0 and at least N tables were fuzzed (when
the run's parts, qemu/harden's LBS_HARDEN_PARTS, include the fuzzer; summary.json
names the parts).
"""
import argparse
import json
import pathlib
import re
import sys


def read(path):
    return path.read_text(errors="replace") if path.exists() else ""


ALL_PARTS = "suite faults teardown-cpu fuzz pressure teardown-engine logwrites args"


def summarise(out, splats, status, seconds, tables, seed, kernel, parts=ALL_PARTS):
    """the summary dict and whether the run is bad"""
    logs = "".join(read(p) for p in sorted(out.glob("*.log")))

    def total(pattern):
        # the tests print these records at the start of a line of their own
        return sum(int(m) for m in re.findall(pattern, logs, re.M))

    fuzz = json.loads(read(out / "fuzz.json") or "{}")
    argfuzz = json.loads(read(out / "argfuzz.json") or "{}")
    # run-guest-tests' result lines (a test without a result counts too), and the
    # results of qemu/harden's own boots (the suite's logs are copied beside them)
    boots = "".join(read(p) for p in sorted(out.glob("*.log"))
                    if re.fullmatch(r"(harden|pressure|teardown-\w+|logwrites)\.log", p.name))
    failed = len(re.findall(r"^FAIL ", read(out / "suite.txt"), re.M)) + \
        len(re.findall(r"^LBS-RESULT \S+ FAIL", boots, re.M))
    summary = {
        "kernel": kernel,
        "parts": parts.split(),
        "seed": seed,
        "seconds": seconds,
        "tables_tried": fuzz.get("tables_tried", 0),
        "messages_tried": fuzz.get("messages_tried", 0),
        "fio_bytes_verified": total(r"^PRESSURE bytes=(\d+)"),
        "faults_injected": total(r"^PRESSURE bytes=\d+ faults=(\d+)") + total(r"^FAULTS injected=(\d+)"),
        "splats": splats,
        "leaks": total(r"^LEAKS ours=(\d+)"),
        "verify_errors": len(re.findall(r"^FAIL (pressure|faults|lifecycle)\.sh: (?!kernel report:)",
                                        logs, re.M)),
        "unexpected_errnos": fuzz.get("unexpected_errnos", 0),
        "guest_test_failures": failed,
        "tool_command_lines": argfuzz.get("runs", 0),
        "tool_failures": sum(argfuzz.get(k, 0) for k in ("crash", "sanitizer", "refusal", "timeout",
                                                          "control", "output", "template")),
    }
    bad = any(summary[k] for k in ("splats", "leaks", "verify_errors", "unexpected_errnos",
                                   "guest_test_failures", "tool_failures")) \
        or status != 0 or ("fuzz" in parts.split() and summary["tables_tried"] < tables)
    return summary, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=pathlib.Path)
    for name in ("splats", "status", "seconds", "tables", "seed"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--parts", default=ALL_PARTS)
    a = ap.parse_args()
    summary, bad = summarise(a.out, a.splats, a.status, a.seconds, a.tables, a.seed, a.kernel,
                             a.parts)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
