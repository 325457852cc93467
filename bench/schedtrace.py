#!/usr/bin/env python3
"""Where a fio job's time goes, from bench/guest/schedtrace.sh's log.

  schedtrace.py LOG

For each variant (TARGET:SECTOR_SIZE[:inline]), summed over its repetitions:
throughput, and per class of task (fio; writer: dm-crypt's dmcrypt_write/N or
ours kcryptd_lbs_w/N; kworker: the crypt and I/O workers among the rest;
ksoftirqd; other; idle) the CPU time per MiB moved and the share of all CPUs'
time; then, per class, how long a woken task waited for a CPU (sched_waking
to its sched_switch in: median and 90th percentile, in microseconds) and how
often it was woken per MiB; and how many wake-ups (sched_wakeup) put a task on
a CPU that was running another while some other CPU was idle. Nothing is judged: the numbers are for a reader
comparing variants (Documentation/performance.rst).
"""
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                  r"(?P<ts>\d+\.\d+): (?P<ev>\w+): (?P<rest>.*)$")
KV = re.compile(r"(\w+)=(\S+)")
CLASSES = ("fio", "writer", "kworker", "ksoftirqd", "other", "idle")


def klass(comm, pid):
    if pid == 0:
        return "idle"
    for prefix, name in (("fio", "fio"), ("dmcrypt_write", "writer"), ("kcryptd_lbs_w", "writer"),
                         ("kworker", "kworker"), ("ksoftirqd", "ksoftirqd")):
        if comm.startswith(prefix):
            return name
    return "other"


def switch_fields(rest):
    """prev_comm, prev_pid, next_comm, next_pid of a sched_switch (comms may hold spaces)."""
    m = re.match(r"prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=(.*?) next_pid=(\d+)", rest)
    if not m:
        raise ValueError("a sched_switch line I cannot read: " + rest[:120])
    return m.group(1), int(m.group(2)), m.group(3), int(m.group(4))


def analyse(lines):
    """One run's trace: {class: ms}, trace seconds, cpus, {class: [wait us]},
    {class: wakeups}, (misplaced wake-ups, all sched_wakeup events)."""
    events = [(float(m.group("ts")), int(m.group("cpu")), m.group("ev"), m.group("rest"))
              for m in map(LINE.match, lines) if m]
    if not events:
        raise ValueError("no trace line")
    cpus = {cpu for _, cpu, _, _ in events}
    run_ms = defaultdict(float)
    waits, wakeups = defaultdict(list), defaultdict(int)
    last = {}           # cpu -> (ts, class) of the task that is running there
    running = {}        # cpu -> pid running there (0: idle; unseen: idle)
    woken = {}          # pid -> ts of its first waking
    misplaced = all_wakeups = 0
    first, end = events[0][0], events[-1][0]
    for ts, cpu, ev, rest in events:
        if ev in ("sched_waking", "sched_wakeup"):
            kv = dict(KV.findall(rest))
            pid = int(kv.get("pid", -1))
            if pid not in woken:
                wakeups[klass(kv.get("comm", ""), pid)] += 1
                woken[pid] = ts
            if ev == "sched_wakeup" and "target_cpu" in kv:
                target = int(kv["target_cpu"])
                all_wakeups += 1
                misplaced += (running.get(target, 0) != 0 and
                              any(running.get(c, 0) == 0 for c in cpus - {target}))
        elif ev == "sched_switch":
            pcomm, ppid, ncomm, npid = switch_fields(rest)
            since, _ = last.get(cpu, (first, None))
            run_ms[klass(pcomm, ppid)] += (ts - since) * 1000
            last[cpu] = (ts, klass(ncomm, npid))
            running[cpu] = npid
            if npid in woken:
                waits[klass(ncomm, npid)].append((ts - woken.pop(npid)) * 1e6)
    for cpu, (ts, k) in last.items():
        run_ms[k] += (end - ts) * 1000
    return run_ms, end - first, len(last), waits, wakeups, (misplaced, all_wakeups)


def pct(vals, q):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))] if vals else float("nan")


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    traces, runs, order = defaultdict(list), defaultdict(list), []
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            w = line.split(" ", 3)
            if w[0] == "SCHED-RUN":
                v = w[1]
                mibps, mib = (float(x) for x in w[3].split())
                runs[v].append((mibps, mib))
                if v not in order:
                    order.append(v)
            elif w[0] == "SCHED-TRACE" and len(w) == 4:
                traces[(w[1], w[2])].append(w[3])
    if not order:
        sys.exit("schedtrace.py: no SCHED-RUN line in " + argv[1])
    for v in order:
        tot_ms, waits, wakeups, secs, cpus = defaultdict(float), defaultdict(list), defaultdict(int), 0.0, 0
        misplaced = all_wakeups = 0
        for rep in range(1, len(runs[v]) + 1):
            r, s, c, wt, wk, (mp, aw) = analyse(traces[(v, str(rep))])
            misplaced += mp
            all_wakeups += aw
            for k, ms in r.items():
                tot_ms[k] += ms
            for k, ws in wt.items():
                waits[k] += ws
            for k, n in wk.items():
                wakeups[k] += n
            secs += s
            cpus = max(cpus, c)
        mib = sum(m for _, m in runs[v])
        print(f"{v}: {statistics.median(x for x, _ in runs[v]):.1f} MiB/s (median of {len(runs[v])}), "
              f"{mib:.0f} MiB, {secs:.1f} s traced on {cpus} CPUs")
        for k in CLASSES:
            line = (f"  {k:9} {tot_ms[k] / mib:7.2f} ms/MiB {100 * tot_ms[k] / (secs * 1000 * max(cpus, 1)):5.1f} %")
            if waits[k]:
                line += (f"   woken {wakeups[k] / mib:6.2f}/MiB, wait us median {statistics.median(waits[k]):7.1f}"
                         f" p90 {pct(waits[k], 0.9):7.1f}")
            print(line)
        if all_wakeups:
            print(f"  misplaced wake-ups (onto a busy CPU while another idled): {misplaced} of "
                  f"{all_wakeups} ({100 * misplaced / all_wakeups:.1f} %)")


if __name__ == "__main__":
    main(sys.argv)
