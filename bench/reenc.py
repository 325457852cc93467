#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The reencrypt part of `make bench` (Documentation/performance.rst), host half.

  reenc.py report --out DIR KERNEL=LOG...   DIR/reencrypt.json and DIR/reencrypt.md
                                            from the guest logs of bench/guest/reenc.sh,
                                            and the table on stdout
  reenc.py smoke JSON REPS                  make check's structural check: every case has
                                            both methods with REPS runs and a rate above 0

reencrypt.json is a list of records, one per kernel, case and method (MiB/s):
  {"kernel", "case": "4096-65536"|"key-65536", "method": "reencrypt"|"dd",
   "bytes", "runs", "mibps_median", "mibps_min", "mibps_max",
   "steady_mibps_median" (reencrypt: its hotzones after the first; dd: null),
   "ratio" (reencrypt: its median over dd's median; dd: null)}
and one per kernel and design for the online case (milliseconds, each the median
over the repetitions):
  {"kernel", "case": "online-key-65536"|"online-key-65536-old-design",
   "method": "stall", "runs", "baseline_max_ms", "far_max_ms", "far_p99_ms",
   "far_writes", "all_max_ms", "hotzone_max_ms", "hotzones"}
The old design's record is there when qemu/bench ran it (--old-design); where it
could not, the guest log's REENC-NOTE says why, and the table repeats it.
"""
import argparse
import json
import statistics
import sys

CASES = {
    "4096-65536": "4096 -> 65536, new key",
    "key-65536": "new key at 65536",
}
METHODS = ("reencrypt", "dd")


ONLINE = "online-key-65536"
ONLINE_CASES = {
    ONLINE: "today's: only the hotzone held",
    ONLINE + "-old-design": "the old design: NAME frozen for each hotzone",
}
STALL_FIELDS = ("baseline_max_ms", "far_max_ms", "far_p99_ms", "far_writes", "all_max_ms",
                "hotzone_max_ms", "hotzones")


def parse_log(path):
    """The runs, the online stall runs and the info lines of one guest log."""
    runs, stalls, info = [], [], {}
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            words = line.split()
            if not words:
                continue
            if words[0] == "REENC-INFO" and len(words) >= 2:
                info[words[1]] = " ".join(words[2:])
            elif words[0] == "REENC-NOTE":
                info.setdefault("notes", []).append(" ".join(words[1:]))
            elif words[0] == "REENC-RUN":
                if len(words) != 9:
                    raise SystemExit(f"reenc.py: {path}: a REENC-RUN line of {len(words)} words: {line.strip()}")
                _, _step, case, rep, method, nbytes, secs, mibps, steady = words
                runs.append({
                    "case": case, "rep": int(rep), "method": method, "bytes": int(nbytes),
                    "seconds": float(secs), "mibps": float(mibps),
                    "steady": None if steady == "-" else float(steady),
                })
            elif words[0] == "REENC-STALL":
                if len(words) != 4 + len(STALL_FIELDS):
                    raise SystemExit(f"reenc.py: {path}: a REENC-STALL line of {len(words)} words: {line.strip()}")
                if words[2] not in ONLINE_CASES:
                    raise SystemExit(f"reenc.py: {path}: a REENC-STALL line of an unknown case: {line.strip()}")
                stalls.append({"case": words[2], "rep": int(words[3]),
                               **{k: float(v) for k, v in zip(STALL_FIELDS, words[4:])}})
    return runs, stalls, info


def stall_record(kernel, stalls):
    """The online case's medians over its repetitions, or None without one."""
    if not stalls:
        return None
    rec = {"kernel": kernel, "case": stalls[0]["case"], "method": "stall", "runs": len(stalls)}
    for k in STALL_FIELDS:
        rec[k] = round(statistics.median(s[k] for s in stalls), 1)
    return rec


def records_of(kernel, runs):
    out = []
    for case in CASES:
        medians = {}
        for method in METHODS:
            these = [r for r in runs if r["case"] == case and r["method"] == method]
            if not these:
                continue
            rates = [r["mibps"] for r in these]
            steady = [r["steady"] for r in these if r["steady"] is not None]
            medians[method] = statistics.median(rates)
            out.append({
                "kernel": kernel, "case": case, "method": method, "bytes": these[0]["bytes"],
                "runs": len(these), "mibps_median": round(medians[method], 3),
                "mibps_min": min(rates), "mibps_max": max(rates),
                "steady_mibps_median": round(statistics.median(steady), 3) if steady else None,
                "ratio": None,
            })
        if "reencrypt" in medians and medians.get("dd"):
            for rec in out:
                if rec["kernel"] == kernel and rec["case"] == case and rec["method"] == "reencrypt":
                    rec["ratio"] = round(medians["reencrypt"] / medians["dd"], 3)
    return out


def table(records, infos):
    lines = []
    for kernel in dict.fromkeys(r["kernel"] for r in records):
        info = infos.get(kernel, {})
        lines.append(f"reencrypt on {kernel} ({info.get('kernel_release', '?')}): "
                     f"{info.get('volume', '?')}; hotzone {info.get('hotzone', '?')}")
        lines.append("")
        lines.append("| conversion | reencrypt MiB/s | steady | dd copy MiB/s | reencrypt / dd |")
        lines.append("|---|---|---|---|---|")
        for case, label in CASES.items():
            by = {r["method"]: r for r in records if r["kernel"] == kernel and r["case"] == case}
            if not by:
                continue
            re, dd = by.get("reencrypt"), by.get("dd")

            def cell(rec):
                if rec is None:
                    return "-"
                return f"{rec['mibps_median']:.1f} ({rec['mibps_min']:.1f}-{rec['mibps_max']:.1f})"
            steady = "-" if re is None or re["steady_mibps_median"] is None else f"{re['steady_mibps_median']:.1f}"
            ratio = "-" if re is None or re["ratio"] is None else f"x{re['ratio']:.2f}"
            lines.append(f"| {label} | {cell(re)} | {steady} | {cell(dd)} | {ratio} |")
        lines.append("")
        stalls = {r["case"]: r for r in records if r["kernel"] == kernel and r["method"] == "stall"}
        if stalls:
            runs = "/".join(str(r["runs"]) for r in stalls.values())
            lines.append(f"online, a new key at 65536, beside two writers of 64 KiB O_DIRECT blocks "
                         f"(median of {runs}; milliseconds):")
            lines.append("")
            lines.append("| design | longest write before the run | a quarter away: longest (p99, writes) "
                         "| anywhere: longest | slowest hotzone (hotzones) |")
            lines.append("|---|---|---|---|---|")
            for case, label in ONLINE_CASES.items():
                stall = stalls.get(case)
                if stall is None:
                    lines.append(f"| {label} | not measured | - | - | - |")
                    continue
                lines.append(f"| {label} | {stall['baseline_max_ms']:.1f} | {stall['far_max_ms']:.1f} "
                             f"({stall['far_p99_ms']:.1f}, {stall['far_writes']:.0f}) "
                             f"| {stall['all_max_ms']:.1f} | {stall['hotzone_max_ms']:.1f} "
                             f"({stall['hotzones']:.0f}) |")
            lines.append("")
        for note in info.get("notes", []):
            lines.append(f"note: {note}")
            lines.append("")
    return "\n".join(lines)


def report(args):
    records, infos = [], {}
    for pair in args.logs:
        kernel, _, path = pair.partition("=")
        if not path:
            raise SystemExit(f"reenc.py: '{pair}' is not KERNEL=LOG")
        runs, stalls, info = parse_log(path)
        if not runs:
            raise SystemExit(f"reenc.py: {path}: no REENC-RUN line (see the log)")
        if not any(st["case"] == ONLINE for st in stalls):
            raise SystemExit(f"reenc.py: {path}: no REENC-STALL line of {ONLINE} (see the log)")
        infos[kernel] = info
        records += records_of(kernel, runs)
        for case in ONLINE_CASES:
            these = [st for st in stalls if st["case"] == case]
            if these:
                records.append(stall_record(kernel, these))
    with open(f"{args.out}/reencrypt.json", "w", encoding="utf-8") as out:
        json.dump(records, out, indent=1)
        out.write("\n")
    text = table(records, infos)
    with open(f"{args.out}/reencrypt.md", "w", encoding="utf-8") as out:
        out.write(text + "\n")
    print(text)


def smoke(args):
    with open(args.json, encoding="utf-8") as f:
        records = json.load(f)
    problems = []
    kernels = sorted({r["kernel"] for r in records}) or ["(none)"]
    for kernel in kernels:
        for case in CASES:
            for method in METHODS:
                rec = [r for r in records if r["kernel"] == kernel and r["case"] == case and r["method"] == method]
                if len(rec) != 1:
                    problems.append(f"{kernel} {case} {method}: {len(rec)} records, not 1")
                    continue
                if rec[0]["runs"] != args.reps or not rec[0]["mibps_min"] > 0:
                    problems.append(f"{kernel} {case} {method}: {rec[0]['runs']} runs, min {rec[0]['mibps_min']}")
                if method == "reencrypt" and not (rec[0]["ratio"] or 0) > 0:
                    problems.append(f"{kernel} {case}: no ratio to the dd copy")
        stall = [r for r in records if r["kernel"] == kernel and r["method"] == "stall" and r["case"] == ONLINE]
        if len(stall) != 1:
            problems.append(f"{kernel} online: {len(stall)} stall records, not 1")
        elif stall[0]["runs"] != args.reps or not stall[0]["far_writes"] > 0 or not stall[0]["hotzones"] > 0:
            problems.append(f"{kernel} online: {stall[0]['runs']} runs, {stall[0]['far_writes']} far writes, "
                            f"{stall[0]['hotzones']} hotzones")
    if problems:
        for p in problems:
            print(f"reenc.py smoke: {p}", file=sys.stderr)
        raise SystemExit(1)
    print(f"reenc.py smoke: {len(records)} records, every case with both methods")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    rep.add_argument("logs", nargs="+")
    rep.set_defaults(run=report)
    smk = sub.add_parser("smoke")
    smk.add_argument("json")
    smk.add_argument("reps", type=int)
    smk.set_defaults(run=smoke)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
