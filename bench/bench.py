#!/usr/bin/env python3
"""The host half of `make bench` (qemu/bench): guest logs to results.

  bench.py report --out DIR KERNEL=LOG...   results.json, results.md, bench.png
  bench.py smoke DIR/results.json REPS       the smoke pass's structural check
  bench.py rst DIR/results.json KERNEL       KERNEL's table as reStructuredText
                                             (Documentation/performance.rst)
  bench.py rst-cpu DIR/results.json KERNEL   the same of CPU time per MiB

A log is the output of bench/guest/bench.sh through qemu/run: BENCH-PLAN,
BENCH-INFO, BENCH-RUN and BENCH-LIMIT lines (MiB/s). Records (see
Documentation/performance.rst):
  {kernel, target, cipher, flags, sector_size, job, mbps_median, mbps_min,
   mbps_max, runs, cpu_ms_per_mib_median, cpu_ms_per_mib_min, cpu_ms_per_mib_max}
  {kernel, limit, cipher, sector_size, job, mbps}
mbps is MiB/s (2^20 bytes a second); cpu_ms_per_mib the guest's CPU time per
MiB moved, outside the engine's channel threads (absent in logs from before it
was measured). Nothing here judges speed: the smoke check
asks only that every record is there and non-zero.
"""
import json
import os
import statistics
import subprocess
import sys

JOBS = ["seqread", "seqwrite", "randread", "randwrite"]
READ_JOBS = {"seqread", "randread"}


def parse(kernel, path):
    """Records and info of one kernel's log; exits when steps are missing."""
    runs, cpu, limits, info, plan, seen = {}, {}, [], {}, None, set()
    ramdisk = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "BENCH-PLAN":
                plan = int(w[1])
            elif w[0] == "BENCH-INFO" and len(w) >= 3:
                info.setdefault(w[1], " ".join(w[2:]))
            elif w[0] == "BENCH-RUN" and len(w) in (9, 10):
                step, target, cipher, flags, ss, job, _rep, mbps = w[1:9]
                seen.add(int(step))
                flags = "" if flags == "-" else flags.replace(",", " ")
                key = (target, cipher, flags, int(ss), job)
                runs.setdefault(key, []).append(float(mbps))
                if len(w) == 10:
                    cpu.setdefault(key, []).append(float(w[9]))
            elif w[0] == "BENCH-LIMIT" and len(w) == 7:
                step, limit, cipher, ss, job, mbps = w[1:]
                seen.add(int(step))
                if limit == "ramdisk":
                    ramdisk.setdefault(job, []).append(float(mbps))
                else:
                    limits.append({"kernel": kernel, "limit": limit, "cipher": cipher,
                                   "sector_size": int(ss), "job": job, "mbps": float(mbps)})
    if plan is None:
        sys.exit(f"bench.py: {path}: no BENCH-PLAN line: the guest never started the benchmark")
    missing = sorted(set(range(1, plan + 1)) - seen)
    if missing:
        sys.exit(f"bench.py: {path}: {len(missing)} of {plan} steps have no record "
                 f"(first missing: {missing[0]}); the run did not finish")
    records = []
    for key, vals in sorted(runs.items()):
        target, cipher, flags, ss, job = key
        rec = {"kernel": kernel, "target": target, "cipher": cipher, "flags": flags,
               "sector_size": ss, "job": job,
               "mbps_median": round(statistics.median(vals), 3),
               "mbps_min": min(vals), "mbps_max": max(vals), "runs": len(vals)}
        if len(cpu.get(key, [])) == len(vals):
            rec.update({"cpu_ms_per_mib_median": round(statistics.median(cpu[key]), 3),
                        "cpu_ms_per_mib_min": min(cpu[key]), "cpu_ms_per_mib_max": max(cpu[key])})
        records.append(rec)
    for job in JOBS:
        if job in ramdisk:
            limits.append({"kernel": kernel, "limit": "ramdisk", "cipher": None,
                           "sector_size": None, "job": job,
                           "mbps": round(statistics.median(ramdisk[job]), 3)})
    return records, limits, info


def model_bounds(kernel, limits, info):
    """channels * S / (latency + t(S)) in MiB/s per size, t(S) from the cipher limit."""
    try:
        lat = int(info["engine_latency_us"]) / 1e6
        ch = int(info["engine_channels"])
    except (KeyError, ValueError):
        return {}
    out = {}
    for r in limits:
        if r["kernel"] == kernel and r["limit"] == "cipher" and r["job"] == "encrypt" and r["mbps"] > 0:
            s = r["sector_size"]
            t = s / (r["mbps"] * 1048576)
            out[s] = ch * s / (lat + t) / 1048576
    return out


def fmt(v):
    """Three significant figures below 10 (the engine at 512 is 0.09 MiB/s)."""
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def median_of(records, kernel, target, cipher, flags, ss, job):
    for r in records:
        if (r["kernel"], r["target"], r["cipher"], r["flags"], r["sector_size"], r["job"]) == \
                (kernel, target, cipher, flags, ss, job):
            return r
    return None


def limit_of(limits, kernel, limit, ss, job):
    for r in limits:
        if (r["kernel"], r["limit"], r["sector_size"], r["job"]) == (kernel, limit, ss, job):
            return r["mbps"]
    return None


FLAGS = "no_read_workqueue no_write_workqueue"
VARIANTS = [("stock", ""), ("stock", FLAGS), ("lbscrypt", ""), ("lbscrypt", FLAGS)]
LABEL = {("stock", ""): "stock", ("lbscrypt", ""): "ours",
         ("stock", FLAGS): "stock+inline", ("lbscrypt", FLAGS): "ours+inline"}


def baseline(records, k, t, cipher, fl, ss, job):
    """What a row's xN.NN compares with: stock with the same flags (stock+inline: stock)."""
    return median_of(records, k, "stock", cipher, fl if t != "stock" else "", ss, job)


def table_rows(k, records, metric="mbps"):
    """Kernel k's table: [cipher, sector, variant, a cell per job], a row per case;
    metric "mbps" (MiB/s) or "cpu_ms_per_mib"."""
    rows = []
    keys = sorted({(r["cipher"], r["sector_size"]) for r in records if r["kernel"] == k})
    med = metric + "_median"
    for cipher, ss in keys:
        for t, fl in VARIANTS:
            cells = []
            for job in JOBS:
                r = median_of(records, k, t, cipher, fl, ss, job)
                if r is None or med not in r:
                    break
                cell = f"{fmt(r[med])} ({fmt(r[metric + '_min'])}-{fmt(r[metric + '_max'])})"
                st = baseline(records, k, t, cipher, fl, ss, job)
                if (t, fl) != ("stock", "") and st and st.get(med, 0) > 0:
                    cell += f" x{r[med] / st[med]:.2f}"
                cells.append(cell)
            if len(cells) == len(JOBS):
                rows.append([cipher, str(ss), LABEL[(t, fl)]] + cells)
    return rows


def rst(path, kernel, metric="mbps"):
    """Kernel's table of results.json as a reStructuredText simple table, as
    Documentation/performance.rst shows the runs."""
    with open(path) as f:
        records = [r for r in json.load(f) if "target" in r]
    rows = [["cipher", "sector", "variant"] + JOBS] + table_rows(kernel, records, metric)
    if len(rows) == 1:
        sys.exit(f"bench.py rst: no records of {kernel} in {path}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    print("\n".join([rule, lines[0], rule] + lines[1:] + [rule]))


def markdown(kernels, records, limits, infos):
    out = ["# make bench", "",
           "MiB/s, median of the runs (min-max); `+inline` is with "
           f"`{FLAGS}`. fio on a ramdisk, direct, libaio, iodepth 4; seq 1 MiB, rand 64 KiB.", ""]
    for k in kernels:
        info = infos[k]
        out += [f"## {k} ({info.get('kernel_release', '?')}, page size {info.get('page_size', '?')})", "",
                f"- targets: {info.get('targets', '?')} (ours: srcversion "
                f"{info.get('ours_srcversion', '?')}); fio {info.get('fio', '')}",
                f"- engine: latency {info.get('engine_latency_us', '?')} us, "
                f"{info.get('engine_channels', '?')} channels, queue depth "
                f"{info.get('engine_queue_depth', '?')}; cipher limit driver: "
                f"{info.get('driver_cipher', '?')}", ""]
        out += ["| cipher | sector | variant | " + " | ".join(JOBS) + " |",
                "|---|---:|---|" + "---:|" * len(JOBS)]
        for row in table_rows(k, records):
            out.append("| " + " | ".join(row) + " |")
        out += ["", "`xN.NN`: against stock at the same size, job and cipher: ours against "
                "stock with the same flags, stock+inline against stock without them.", ""]
        cpu_rows = table_rows(k, records, "cpu_ms_per_mib")
        if cpu_rows:
            out += ["CPU time per MiB moved (ms, median (min-max)): the guest's busy time on every CPU "
                    "during the run, fio's included, less the engine's channel threads' (they stand in "
                    "for the hardware). Lower is better; `xN.NN` as above.", "",
                    "| cipher | sector | variant | " + " | ".join(JOBS) + " |",
                    "|---|---:|---|" + "---:|" * len(JOBS)]
            out += ["| " + " | ".join(row) + " |" for row in cpu_rows] + [""]
        out += ["| limit | " + " | ".join(JOBS) + " |", "|---|" + "---:|" * len(JOBS),
                "| ramdisk | " + " | ".join(fmt(limit_of(limits, k, "ramdisk", None, j)) for j in JOBS) + " |", ""]
        bounds = model_bounds(k, limits, info)
        sizes = sorted({r["sector_size"] for r in limits if r["kernel"] == k and r["sector_size"]})
        out += ["| unit size | cipher encrypt | cipher decrypt | engine encrypt | engine decrypt | model bound |",
                "|---:|---:|---:|---:|---:|---:|"]
        for s in sizes:
            out.append(f"| {s} | " + " | ".join(fmt(limit_of(limits, k, lim, s, op))
                                              for lim in ("cipher", "engine")
                                              for op in ("encrypt", "decrypt")) +
                       f" | {fmt(bounds.get(s))} |")
        out += ["", "model bound: channels x S / (latency + t(S)), t(S) = S / (cipher encrypt rate).", ""]
        out += goals(k, records, limits, bounds)
    return "\n".join(out) + "\n"


def goals(k, records, limits, bounds):
    """The benchmark's goals, as measured (reported, never asserted)."""
    out = ["Goals, as measured:", ""]
    ratios = []
    for r in records:
        if r["kernel"] == k and r["target"] == "lbscrypt":
            st = baseline(records, k, "lbscrypt", r["cipher"], r["flags"], r["sector_size"], r["job"])
            if st and st["mbps_median"] > 0:
                ratios.append((r["mbps_median"] / st["mbps_median"], r))
    if ratios:
        lo = min(ratios, key=lambda x: x[0])
        out.append(f"- ours / stock (same flags), lowest median ratio: {lo[0]:.2f} "
                   f"({LABEL[('lbscrypt', lo[1]['flags'])]} {lo[1]['cipher']} "
                   f"{lo[1]['sector_size']} {lo[1]['job']}; goal >= 1.00)")
    sizes = sorted({r["sector_size"] for r in records if r["kernel"] == k})
    big = sizes[-1] if sizes else None
    for cipher in ("engine", "cpu"):
        for job in JOBS:
            ours = median_of(records, k, "lbscrypt", cipher, "", big, job)
            st4 = median_of(records, k, "stock", cipher, "", 4096, job)
            if not ours or not st4 or big is None or big <= 4096:
                continue
            line = (f"- {cipher} {job}: ours@{big} / stock@4096 = "
                    f"{ours['mbps_median'] / st4['mbps_median']:.2f}")
            if cipher == "engine":
                eng = limit_of(limits, k, "engine", big, "decrypt" if job in READ_JOBS else "encrypt")
                if eng:
                    line += f"; ours@{big} / engine's measured limit = {ours['mbps_median'] / eng:.2f} (goal >= 0.85)"
                if big in bounds and 4096 in bounds:
                    line += f"; 0.85 x bound ratio = {0.85 * bounds[big] / bounds[4096]:.2f}"
            else:
                line += " (goal >= 1.09)"
                inl = median_of(records, k, "lbscrypt", cipher, FLAGS, big, job)
                if inl and job in READ_JOBS:
                    line += f"; with inline flags / without = {inl['mbps_median'] / ours['mbps_median']:.2f} (goal >= 1)"
                st_in = median_of(records, k, "stock", cipher, FLAGS, 4096, job)
                st_pl = median_of(records, k, "stock", cipher, "", 4096, job)
                if st_in and st_pl and job in READ_JOBS:
                    line += f"; stock@4096 with them / without = {st_in['mbps_median'] / st_pl['mbps_median']:.2f}"
            out.append(line)
    cpu_key = "cpu_ms_per_mib_median"
    for job in JOBS:
        ours = median_of(records, k, "lbscrypt", "engine", "", big, job)
        st_e = median_of(records, k, "stock", "engine", "", 4096, job)
        st_c = median_of(records, k, "stock", "cpu", "", 4096, job)
        if not ours or cpu_key not in ours or big is None:
            continue
        parts = [f"{other}: {ours[cpu_key] / r[cpu_key]:.2f}" for other, r in
                 (("stock@4096 engine", st_e), ("stock@4096 cpu", st_c)) if r and r.get(cpu_key, 0) > 0]
        if parts:
            out.append(f"- CPU per MiB, {job}, ours@{big} engine ({fmt(ours[cpu_key])} ms) against "
                       + "; ".join(parts) + " (below 1: less CPU)")
    return out + [""]


def plot(kernels, records, limits, infos, outdir):
    """One PNG: a row per kernel, a column per job; limits dashed."""
    datadir = os.path.join(outdir, "plot")
    os.makedirs(datadir, exist_ok=True)
    series = [(c, t, fl) for c in ("cpu", "engine") for t, fl in VARIANTS]
    sizes = sorted({r["sector_size"] for r in records} |
                   {r["sector_size"] for r in limits if r["sector_size"]})
    tics = ", ".join(f"'{s // 1024}K' {s}" if s >= 1024 else f"'{s}' {s}" for s in sizes)
    cmds = [f"set terminal pngcairo size {4 * 460},{len(kernels) * 480} font ',9'",
            f"set output '{os.path.join(outdir, 'bench.png')}'",
            f"set multiplot layout {len(kernels)},4",
            "set logscale x 2", "set logscale y", f"set xtics ({tics})",
            f"set xrange [{sizes[0] / 1.5 if sizes else 256}:{sizes[-1] * 1.5 if sizes else 131072}]",
            "set key outside bottom center horizontal maxrows 4 font ',7'",
            "set xlabel 'sector size (bytes)'", "set ylabel 'MiB/s'", "set grid"]
    for k in kernels:
        bounds = model_bounds(k, limits, infos[k])
        for job in JOBS:
            plots = []
            for c, t, fl in series:
                pts = sorted((r["sector_size"], r["mbps_median"]) for r in records
                             if (r["kernel"], r["cipher"], r["target"], r["flags"], r["job"]) == (k, c, t, fl, job))
                if not pts:
                    continue
                name = f"{k}-{job}-{c}-{LABEL[(t, fl)]}.dat".replace("+", "_")
                with open(os.path.join(datadir, name), "w") as f:
                    f.writelines(f"{s} {v}\n" for s, v in pts)
                plots.append(f"'{os.path.join(datadir, name)}' using 1:2 with linespoints "
                             f"title '{LABEL[(t, fl)]} {c}'")
            op = "decrypt" if job in READ_JOBS else "encrypt"
            for lim in ("cipher", "engine"):
                pts = sorted((r["sector_size"], r["mbps"]) for r in limits
                             if (r["kernel"], r["limit"], r["job"]) == (k, lim, op))
                if pts:
                    name = f"{k}-{job}-limit-{lim}.dat"
                    with open(os.path.join(datadir, name), "w") as f:
                        f.writelines(f"{s} {v}\n" for s, v in pts)
                    plots.append(f"'{os.path.join(datadir, name)}' using 1:2 with lines dashtype 2 "
                                 f"title '{lim} limit ({op})'")
            if bounds:
                name = f"{k}-model-bound.dat"
                with open(os.path.join(datadir, name), "w") as f:
                    f.writelines(f"{s} {v}\n" for s, v in sorted(bounds.items()))
                plots.append(f"'{os.path.join(datadir, name)}' using 1:2 with lines dashtype 3 "
                             "title 'engine model bound'")
            rd = limit_of(limits, k, "ramdisk", None, job)
            if rd:
                plots.append(f"{rd} with lines dashtype 4 title 'ramdisk'")
            cmds.append(f"set title '{k} {job}'")
            if plots:
                cmds.append("plot " + ", ".join(plots))
    cmds.append("unset multiplot")
    script = os.path.join(outdir, "bench.gnuplot")
    with open(script, "w") as f:
        f.write("\n".join(cmds) + "\n")
    res = subprocess.run(["gnuplot", script], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"bench.py: gnuplot failed on {script}:\n{res.stderr}")


def report(outdir, pairs):
    os.makedirs(outdir, exist_ok=True)
    kernels, records, limits, infos = [], [], [], {}
    for pair in pairs:
        kernel, path = pair.split("=", 1)
        rec, lim, info = parse(kernel, path)
        kernels.append(kernel)
        records += rec
        limits += lim
        infos[kernel] = info
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(records + limits, f, indent=1)
        f.write("\n")
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write(markdown(kernels, records, limits, infos))
    plot(kernels, records, limits, infos, outdir)
    print(f"bench: {len(records)} records and {len(limits)} limits -> "
          f"{outdir}/results.json, results.md, bench.png")


def smoke(path, reps):
    """Every target, cipher and job has a non-zero record of REPS runs, and every limit is there."""
    with open(path) as f:
        data = json.load(f)
    runs = [r for r in data if "target" in r]
    lims = [r for r in data if "limit" in r]
    bad = []
    for k in sorted({r["kernel"] for r in data}):
        for c in ("cpu", "engine"):
            for t, fl in VARIANTS:
                for job in JOBS:
                    rs = [r for r in runs if (r["kernel"], r["cipher"], r["target"], r["flags"], r["job"]) ==
                          (k, c, t, fl, job)]
                    if not rs:
                        bad.append(f"{k}: no record for {LABEL[(t, fl)]} {c} {job}")
                    for r in rs:
                        if r["runs"] != reps or not r["mbps_min"] > 0:
                            bad.append(f"{k}: {LABEL[(t, fl)]} {c} {job} ss={r['sector_size']}: "
                                       f"{r['runs']} runs (expected {reps}), min {r['mbps_min']} MiB/s")
                        if "cpu_ms_per_mib_median" not in r:
                            bad.append(f"{k}: {LABEL[(t, fl)]} {c} {job} ss={r['sector_size']}: "
                                       "no CPU time per MiB")
        for lim, jobs in (("ramdisk", JOBS), ("cipher", ["encrypt", "decrypt"]),
                          ("engine", ["encrypt", "decrypt"])):
            for job in jobs:
                ls = [r for r in lims if (r["kernel"], r["limit"], r["job"]) == (k, lim, job)]
                if not ls or not all(r["mbps"] > 0 for r in ls):
                    bad.append(f"{k}: the {lim} limit for {job} is missing or zero")
    for b in bad:
        print(f"FAIL bench smoke: {b}")
    if bad:
        sys.exit(1)
    print(f"bench smoke: {len(runs)} records and {len(lims)} limits, each present and non-zero")


def main(argv):
    if len(argv) >= 4 and argv[1] == "report" and argv[2] == "--out":
        report(argv[3], argv[4:])
    elif len(argv) == 4 and argv[1] == "rst":
        rst(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "rst-cpu":
        rst(argv[2], argv[3], "cpu_ms_per_mib")
    elif len(argv) == 4 and argv[1] == "smoke":
        smoke(argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
