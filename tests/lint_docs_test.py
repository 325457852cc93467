#!/usr/bin/env python3
"""tests/lint_docs_test.py: tests/lint-docs' refusals of reference text, on
planted lines (make lint-shell runs it before tests/lint-docs).

Each REFUSED line must draw a refusal naming its kind, each ALLOWED line none:
the dates, this repository's commit hashes, an issue's number, an issue named
by a phrase, an item's number in parentheses, the duration of one run; and
the reference facts the docs hold beside them (limits, rules of thumb, the
verb "issue"). Prints each line that went the wrong way (-v: every line) and
a count; exit 1 on any."""

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
loader = importlib.machinery.SourceFileLoader("lint_docs", str(TOP / "tests/lint-docs"))
spec = importlib.util.spec_from_loader("lint_docs", loader)
lint = importlib.util.module_from_spec(spec)
loader.exec_module(lint)

HEAD = subprocess.run(["git", "-C", str(TOP), "rev-parse", "--short=12", "HEAD"],
                      capture_output=True, text=True, check=True).stdout.strip()

# (kind the refusal must name, text)
REFUSED = [
    ("a date", "Measured on 2026-12-05 beside a second guest."),
    ("a commit of this repository", f"Fixed in {HEAD}, which moved the check."),
    ("points at a tracker", "as issue 52 asks"),
    ("points at a tracker", "see issues #3 and #7"),
    ("names an issue", "the reencrypt issue's share of the budget"),
    ("names an issue", "lbscrypttab(5) (the boot issue writes its content)"),
    ("names an issue", "No case the issues require is skipped."),
    ("names an issue", "This issue is open."),
    ("is an item", "the data is unchanged (item 7)."),
    ("is an item", "what ours wrote, stock reads (items 1 and 6)."),
    ("is an item", "(checksums equal; item 5)"),
    ("the duration of one run", "a cold run's tidy of the library alone took 23 minutes beside the lanes"),
    ("the duration of one run", "its 300 lines under ASan took four minutes of a cold run"),
    ("the duration of one run", "with verifiers at the default iterations it had taken 201 s."),
    ("the duration of one run", "compiling them a second time cost a cold run 1.5 minutes."),
    ("the duration of one run", "the control failed at its first point; faults as above; 670 s."),
    ("the duration of one run", "85 of 85 clean with their records, the control failing, 566 s. In make"),
    ("the duration of one run", "every one clean; 1469 s (4 to 5 s a point)"),
    ("the duration of one run", "the whole sweep ran in 1469 s on arm64-64k"),
    ("the duration of one run", "the lane lasted 12 min"),
    # a sentence wraps: the verb on one line, the duration on the next
    ("the duration of one run", "make check's part (the ext4 conversion) took\n   75 s on arm64-64k"),
]

ALLOWED = [
    "overhead (``LBS_GUEST_BOOT_OVERHEAD``, default 180 s: boot, module loads,",
    "``qemu/run`` returns 122 within 150 s (its timeout is 300 s) with the trace",
    "a hung guest is killed at ``--timeout 45`` (124).",
    "``reference``                  120        about four times the longest expected (5 to 25 s on arm64-64k, idle)",
    "``mainline``                   600        pairwise: 42 cases in ~90 s on arm64-16k, 76 in ~165 s on arm64-64k",
    "Each test on ``arm64-64k`` takes 5 to 25 s.",
    "the default run takes about 3 s on a 64K-page kernel",
    "through the device-mapper ioctls (a process per case would cost 0.25 s):",
    "a boot under emulation costs 30 s or more.",
    "(``--runtime``, default 3 s): ``seqread``",
    "then its reencrypt part on a 32 MiB ramdisk in a second boot (about 40 s);",
    "The host waits 10 s and adds the disk.",
    "About three and a half minutes.",
    "target never cuts it itself (the rest would be issued from the plug's work).",
    "the target will issue a flush before the write",
    "each writer issues requests of 64 KiB",
    "the targets issue a flush first",
    "The requests the converter issues are counted.",
    "(its entries' numbers or names, an item's number in parentheses)",
    "see step 3 (the table) and item lists",
    "commit 0123456789ab (\"dm crypt: a subject\") upstream",
    "taken from ``build/tools/``, through ccache",
]


def kinds(text):
    return lint.reference_refusals("planted.rst", text)


def main():
    verbose = sys.argv[1:] == ["-v"]
    bad = 0
    for kind, text in REFUSED:
        got = kinds(text + "\n")
        if not any(kind in r for r in got):
            bad += 1
            print(f"FAIL not refused as '{kind}': {text!r} (refusals: {got})")
        elif verbose:
            print(f"ok   refused ({kind}): {' '.join(text.split())}")
    for text in ALLOWED:
        got = kinds(text + "\n")
        if got:
            bad += 1
            print(f"FAIL refused, but it is reference: {text!r}: {got}")
        elif verbose:
            print(f"ok   allowed: {text}")
    # the refusal names the line the match starts on
    got = kinds("one line\nanother, which took\n  23 minutes\n")
    if not any(":2:" in r for r in got):
        bad += 1
        print(f"FAIL a wrapped duration is not named by the line it starts on: {got}")
    print(f"lint_docs_test: {len(REFUSED) + len(ALLOWED) + 1 - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
