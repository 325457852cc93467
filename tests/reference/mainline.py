#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""mainline.py: the v2 reference, dm-crypt 1.30.0 as the v2 patch makes it, built
at test time, and the judge of the guest test that compares ours with it.

The larger encryption sector was posted upstream as the v2 patch "dm-crypt:
allow encryption sector size up to PAGE_SIZE" (target 1.30.0, the seed's v2); no
mainline release through 7.3.x has it, so this is not mainline's code but the
v2 reference: each rig kernel's own drivers/md/dm-crypt.c (Debian's
linux-source of that kernel, taken at test time by qemu/lib/mainline-dmcrypt;
no kernel code is kept in this repository) with exactly the edits the v2 diff
makes. Where a Debian kernel's own dm-crypt reports 1.30.0, that module is
the one to compare with.

    mainline.py edit IN OUT [--name crypt_ref]
        Write IN (a kernel's dm-crypt.c) with the v2 edits to OUT, the target
        renamed to NAME so that it registers beside the stock `crypt` and ours
        (--name crypt keeps the name: the in-tree module of a kernel with 1.30.0,
        as the hand-over test installs it in the stock module's place).
        Each edit is anchored on the exact text it replaces and must apply
        exactly once; otherwise nothing is written and the edit is named.
        Prints which bound the kernel gets.
    mainline.py judge LOG... [--json OUT]
        Judge the MAINLINE lines of tests/guest/mainline.sh (see there): the same
        acceptance as the reference, except the documented cases where ours is
        stricter (tests/harden/fuzz_judge.py's list, each counted by name). Prints
        the counts; exit 1 on any other difference or without any case.
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harden"))
import fuzz_judge  # noqa: E402  (the one list of deliberate differences)

BOUND_NAME = "DM_CRYPT_MAX_SECTOR_SIZE"


class EditError(Exception):
    """an edit that did not apply exactly once (the message names it)"""


def edits(name, have_blk_max):
    """The v2 diff's edits of drivers/md/dm-crypt.c as (label, old, new), each
    old text exactly as the kernel has it, plus the rename of the target. The
    version edit is a pattern: 6.12 has 1.28.0, 7.2 and 7.3 have 1.29.0."""
    bound = "min_t(unsigned int, PAGE_SIZE, BLK_MAX_BLOCK_SIZE)" if have_blk_max else "PAGE_SIZE"
    return [
        ("sector_size widened to unsigned int",
         "\tunsigned short sector_size;\n\tunsigned char sector_shift;\n",
         "\tunsigned int sector_size;\n\tunsigned char sector_shift;\n"),
        ("the bound defined after POOL_ENTRY_SIZE",
         "#define POOL_ENTRY_SIZE\t512\n\nstatic DEFINE_SPINLOCK(dm_crypt_clients_lock);\n",
         "#define POOL_ENTRY_SIZE\t512\n\n"
         "/* test-only v2 reference (1.30.0): the largest sector_size */\n"
         "#define %s\t%s\n\n"
         "static DEFINE_SPINLOCK(dm_crypt_clients_lock);\n" % (BOUND_NAME, bound)),
        ("sector_size read with %u",
         'sscanf(opt_string, "sector_size:%hu%c", &cc->sector_size, &dummy) == 1)',
         'sscanf(opt_string, "sector_size:%u%c", &cc->sector_size, &dummy) == 1)'),
        ("the bound replaces 4096",
         "\t\t\t    cc->sector_size > 4096 ||\n",
         "\t\t\t    cc->sector_size > %s ||\n" % BOUND_NAME),
        ("table status prints sector_size with %u",
         'DMEMIT(" sector_size:%d", cc->sector_size);',
         'DMEMIT(" sector_size:%u", cc->sector_size);'),
        ("IMA status prints sector_size with %u",
         'DMEMIT(",sector_size=%d", cc->sector_size);',
         'DMEMIT(",sector_size=%u", cc->sector_size);'),
        ("target name %s" % name,
         '\t.name   = "crypt",\n',
         '\t.name   = "%s",\n' % name),
    ]


VERSION_RE = re.compile(r"\t\.version = \{1, (\d+), 0\},\n")
VERSIONS_KNOWN = ("28", "29")      # 6.12: 1.28.0; 7.2, 7.3: 1.29.0


def apply_edits(text, name="crypt_ref", have_blk_max=True):
    """text with every edit applied; EditError naming the first that did not
    apply exactly once"""
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,15}", name):
        raise EditError("target name %r: lowercase letters, digits and '_'" % name)
    for label, old, new in edits(name, have_blk_max):
        n = text.count(old)
        if n != 1:
            raise EditError("edit '%s': its anchor occurs %d times, expected once: %r" % (label, n, old))
        text = text.replace(old, new)
    found = VERSION_RE.findall(text)
    if len(found) != 1:
        raise EditError("edit 'target version 1.30.0': '.version = {1, N, 0},' occurs %d times, expected once"
                        % len(found))
    if found[0] not in VERSIONS_KNOWN:
        raise EditError("edit 'target version 1.30.0': the kernel's target is 1.%s.0, expected one of %s "
                        "(a kernel with 1.30.0 needs no stand-in)"
                        % (found[0], ", ".join("1.%s.0" % v for v in VERSIONS_KNOWN)))
    return VERSION_RE.sub("\t.version = {1, 30, 0},\n", text)


def cmd_edit(args):
    with open(args.input, encoding="utf-8") as f:
        text = f.read()
    try:
        out = apply_edits(text, args.name, not args.no_blk_max_block_size)
    except EditError as e:
        print("mainline.py: %s: %s" % (args.input, e), file=sys.stderr)
        return 1
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(out)
    bound = "PAGE_SIZE (the kernel has no BLK_MAX_BLOCK_SIZE)" if args.no_blk_max_block_size \
        else "min(PAGE_SIZE, BLK_MAX_BLOCK_SIZE)"
    print("mainline.py: %s: 8 edits applied (target %s, v1.30.0, bound %s)" % (args.output, args.name, bound))
    return 0


# --- the judge -------------------------------------------------------------
# tests/guest/mainline.sh prints, per case,
#   MAINLINE id=N ss=BYTES kind=KIND ours=OUTCOME ref=OUTCOME params="PARAMS"
# (OUTCOME ok, EINVAL or another errno name; PARAMS the table after the target
# name) and, for the cases both load,
#   MAINLINE-SAME id=N table=yes|no status=yes|no ima=yes|no|none data=yes|no
# and one line MAINLINE-SUMMARY with the guest's counts.
CASE_RE = re.compile(r'^MAINLINE id=(\d+) ss=(\d+) kind=(\S+) ours=(\S+) ref=(\S+) params="(.*)"\s*$')
SAME_RE = re.compile(r'^MAINLINE-SAME id=(\d+) ((?:\w+=\w+ ?)+)\s*$')


def judge(lines):
    """(counts, problems) of the guest's lines"""
    cases, same = {}, {}
    for line in lines:
        line = line.rstrip("\r\n")
        m = CASE_RE.match(line)
        if m:
            cases[m.group(1)] = {"id": m.group(1), "ss": int(m.group(2)), "kind": m.group(3),
                                 "ours": m.group(4), "ref": m.group(5), "params": m.group(6)}
            continue
        m = SAME_RE.match(line)
        if m:
            same[m.group(1)] = dict(kv.split("=", 1) for kv in m.group(2).split())
    counts = collections.Counter()
    stricter = collections.Counter()
    problems = []
    for cid, c in sorted(cases.items(), key=lambda kv: int(kv[0])):
        counts["cases"] += 1
        what = "case %s (%s, sector_size %d): %s" % (cid, c["kind"], c["ss"], c["params"][:160])
        if c["ours"] == c["ref"] == "ok":
            counts["loaded by both"] += 1
            s = same.get(cid)
            if s is None:
                problems.append("%s: loaded by both, but no comparison was reported" % what)
                continue
            for field in ("table", "status", "ima", "data"):
                if s.get(field) not in ("yes", "none" if field == "ima" else "yes"):
                    problems.append("%s: %s differs from the reference (%s)" % (what, field, s.get(field)))
            if s.get("data") == "yes":
                counts["cross-reads identical"] += 1
            if s.get("ima") == "yes":
                counts["IMA status identical"] += 1
        elif c["ours"] != "ok" and c["ref"] != "ok":
            counts["refused by both"] += 1
            if c["kind"].startswith("refuse") and (c["ours"] != "EINVAL"):
                problems.append("%s: ours refused with %s, expected EINVAL" % (what, c["ours"]))
        elif c["ours"] == "EINVAL" and c["ref"] == "ok":
            why = fuzz_judge.deliberate({"params": c["params"], "kind": c["kind"]})
            if why is None:
                problems.append("%s: the reference loads it, ours refuses it, and dm-crypt-lbs.rst's "
                                "\"stricter than dm-crypt\" names no such case" % what)
            else:
                counts["stricter (documented)"] += 1
                stricter[why] += 1
        else:
            problems.append("%s: ours %s, the reference %s" % (what, c["ours"], c["ref"]))
        # ours refuses every case of the stricter list; the reference loads it, or, where that
        # kernel's own parsing refuses it too (7.x's iv_offset above 64 bits), refuses it as well
        if c["kind"].startswith(("stricter", "num-lenient:")) and c["ours"] != "EINVAL":
            problems.append("%s: a case of the stricter list, expected ours EINVAL; "
                            "got ours %s, the reference %s" % (what, c["ours"], c["ref"]))
        if c["kind"].startswith("refuse") and c["ours"] == "ok":
            problems.append("%s: a refusal case that ours loads" % what)
    for cid in same:
        if cid not in cases:
            problems.append("MAINLINE-SAME for case %s, which has no MAINLINE line" % cid)
    if not cases:
        problems.append("no MAINLINE lines")
    return counts, stricter, problems


def cmd_judge(args):
    lines = []
    for path in args.logs:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines.extend(f)
    counts, stricter, problems = judge(lines)
    for p in problems:
        print("FAIL %s" % p)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"counts": dict(counts), "stricter": dict(stricter), "problems": problems}, f, indent=1)
    names = "; ".join("%s: %d" % kv for kv in sorted(stricter.items()))
    print("%d cases, %d loaded by both (%d cross-reads identical, IMA status identical in %d), "
          "%d refused by both, %d stricter as documented%s"
          % (counts["cases"], counts["loaded by both"], counts["cross-reads identical"],
             counts["IMA status identical"], counts["refused by both"], counts["stricter (documented)"],
             " (%s)" % names if names else ""))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("edit", help="apply the v2 edits to a kernel's dm-crypt.c")
    e.add_argument("input")
    e.add_argument("output")
    e.add_argument("--name", default="crypt_ref")
    e.add_argument("--no-blk-max-block-size", action="store_true",
                   help="the kernel has no BLK_MAX_BLOCK_SIZE: the bound is PAGE_SIZE")
    j = sub.add_parser("judge", help="judge tests/guest/mainline.sh's output")
    j.add_argument("logs", nargs="+")
    j.add_argument("--json")
    args = ap.parse_args()
    return cmd_edit(args) if args.cmd == "edit" else cmd_judge(args)


if __name__ == "__main__":
    sys.exit(main())
