#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""judge_test.py: the fuzz judge can fail. Makes a small case file, a guest log in
which every case behaves as documented (the judge must pass it), then plants one bad
result at a time (the judge must fail each, in the category named). Host only.

    tests/harden/judge_test.py
"""
import os
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(TOP, "qemu/lib/fuzz_tables.py")
JUDGE = os.path.join(TOP, "tests/harden/fuzz_judge.py")
sys.path.insert(0, os.path.join(TOP, "tests/harden"))
import fuzz_judge  # noqa: E402


def row(c, target, load="OK", logged=0, data="ok", reread="same", data2="ok", ct="c1", tab="t1",
        steps="-", final="-", warn=0, removed=1, msg=""):
    stage = "-" if load == "OK" else "load"
    return ('CASE id=%s kind=%s target=%s op=%s load=%s stage=%s logged=%d data=%s reread=%s '
            'data2=%s ct=%s tab=%s steps=%s final=%s warn=%d removed=%d msg="%s"'
            % (c["id"], c["kind"], target, c["op"], load, stage, logged, data, reread, data2, ct, tab,
               steps, final, warn, removed, msg))


def model_steps(c):
    """steps as documented: key messages need a suspended device, a wiped key blocks resume"""
    out, susp, keyed = [], False, True
    good = c["params"].split()[1]
    for s in c["steps"]:
        if s == "suspend":
            out.append("OK")
            susp = True
        elif s == "resume":
            if not keyed:
                out.append("EAGAIN")
            else:
                out.append("OK")
                susp = False
        elif s == "key wipe" and susp:
            out.append("OK")
            keyed = False
        elif s.startswith("key set ") and susp and len(s.split()) == 3 and \
                (s.split()[2] == good or c["kind"].startswith("msg:set-other")):
            out.append("OK")
            keyed = True
        else:
            out.append("EINVAL")
    return ",".join(out), ("suspended" if susp else "live")


def good_log(cases):
    lines = []
    for target in ("crypt_lbs", "crypt"):
        for c in cases.values():
            if target == "crypt" and "stock-unsafe" in c["flags"]:
                continue
            if c["op"] == "msg":
                steps, final = model_steps(c)
                d2 = "bad" if c["kind"].startswith("msg:set-other") else "ok"
                lines.append(row(c, target, logged=1, steps=steps, final=final,
                                 data2=d2 if final == "live" else "-", reread="-"))
            elif c["kind"] == "valid":
                if target == "crypt" and "ss>4096" in c["flags"]:
                    lines.append(row(c, target, ct="c9", tab="t9"))  # the 4096 twin
                else:
                    lines.append(row(c, target))
            elif target == "crypt" and fuzz_judge.deliberate(c):
                lines.append(row(c, target))        # stock lenient: loads it
            else:
                lines.append(row(c, target, load="EINVAL", logged=1, msg="refused"))
    lines.append('FUZZ-SUMMARY {"devices_left": 0, "kernel_warnings": 0}')
    return lines


def judge(tmp, cases_path, *logs):
    """the judge over one or more logs (lists of lines), as fuzz-run calls it"""
    args = []
    for i, lines in enumerate(logs):
        log = os.path.join(tmp, "log%d" % i)
        with open(log, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        args += ["--log", log]
    js = os.path.join(tmp, "out.json")
    p = subprocess.run([sys.executable, JUDGE, "--cases", cases_path] + args + ["--json", js],
                       stdout=subprocess.PIPE, universal_newlines=True, check=False)
    import json
    with open(js, encoding="utf-8") as f:
        return p.returncode, json.load(f), p.stdout


def plant(lines, pred, **change):
    """replace the first CASE line matching pred with changed fields"""
    out, done = [], False
    for ln in lines:
        if not done and ln.startswith("CASE ") and pred(ln):
            for k, v in change.items():
                k = k.rstrip("_")
                head, _, rest = ln.partition(" %s=" % k)
                rest = rest.split(" ", 1)[1] if " " in rest and not k == "msg" else ""
                ln = "%s %s=%s %s" % (head, k, v, rest) if rest else "%s %s=%s" % (head, k, v)
            done = True
            if change.get("drop_"):
                continue
        out.append(ln)
    assert done, "nothing to plant into for %s" % change
    return out


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases_path = os.path.join(tmp, "cases")
        with open(cases_path, "w", encoding="utf-8") as f:
            subprocess.run([sys.executable, GEN, "--seed", "7", "--count", "400", "--messages", "80"],
                           stdout=f, check=True)
        cases = fuzz_judge.read_cases(cases_path)
        lines = good_log(cases)
        rc, js, out = judge(tmp, cases_path, lines)
        if rc != 0:
            print(out)
            print("FAIL judge_test: the judge failed a log where every case behaves as documented")
            return 1
        print("ok   the judge passes a documented-behaviour log (%d tables, %d messages)"
              % (js["tables_tried"], js["messages_tried"]))
        # make harden's split: ours and stock from two boots, a summary each
        summary = [ln for ln in lines if ln.startswith("FUZZ-SUMMARY ")]
        ours = [ln for ln in lines if " target=crypt_lbs " in ln] + summary
        stock = [ln for ln in lines if " target=crypt " in ln] + summary
        rc, js2, out = judge(tmp, cases_path, ours, stock)
        if rc != 0 or js2["tables_tried"] != js["tables_tried"]:
            print(out)
            print("FAIL judge_test: the same log split into ours' and stock's boots does not pass alike")
            fails += 1
        else:
            print("ok   the same results from two boots (ours, stock) pass alike")
        for what, logs, cat in [("stock's boot is missing", (ours,), "missing_results"),
                                ("stock's boot did not finish", (ours, stock[:-1]), "incomplete")]:
            rc, js2, out = judge(tmp, cases_path, *logs)
            if rc == 0 or not js2.get(cat):
                print(out[-2000:])
                print("FAIL judge_test: %s, yet the judge exits %d" % (what, rc))
                fails += 1
            else:
                print("ok   %s: the judge fails (%s)" % (what, cat))
        # the documented differences, read the way the targets parse a table
        key = "00" * 32
        for params, excused in [("capi:ecb(aes)-essiv:sha256:x %s 0 /dev/ram0 0" % key, True),
                                ("capi:ecb(aes)-frob %s 0 /dev/ram0 0" % key, True),
                                ("capi:ecb(aes)-essiv:sha256 %s 0 /dev/ram0 0" % key, False),
                                ("capi:xts(aes)-plain64 %s 0 /dev/ram0 0" % key, False)]:
            why = fuzz_judge.deliberate({"params": params, "kind": "ivchain"})
            if bool(why) != excused:
                print("FAIL judge_test: %s: the judge says %r" % (params.split()[0], why))
                fails += 1
            else:
                print("ok   %s: %s" % (params.split()[0], why or "no documented difference"))
        ours_valid = lambda ln: " target=crypt_lbs " in ln and " kind=valid " in ln and " load=OK" in ln  # noqa: E731
        stock_valid = lambda ln: " target=crypt " in ln and " kind=valid " in ln and " load=OK" in ln  # noqa: E731
        ours_ref = lambda ln: " target=crypt_lbs " in ln and " load=EINVAL" in ln  # noqa: E731
        plants = [
            ("ours refuses a valid table stock loads", ours_valid,
             dict(load="EINVAL", logged="1"), "unexplained_differences"),
            ("ours refuses with ENOMEM where stock says EINVAL", ours_ref, dict(load="ENOMEM"),
             "unexpected_errnos"),
            ("ours refuses without a kernel message", ours_ref, dict(logged="0"), "silent_refusals"),
            ("ours reads back other data", ours_valid, dict(data="bad"), "data_errors"),
            ("ours reads back other data after the reload", ours_valid, dict(data2="bad"), "data_errors"),
            ("the re-read table differs", ours_valid, dict(reread="diff"), "reread_errors"),
            ("ours writes other bytes than stock", ours_valid, dict(ct="c2"), "data_errors"),
            ("ours reads back another table line than stock", ours_valid, dict(tab="t2"),
             "unexplained_differences"),
            ("ours loads what stock refuses (not a large sector)", stock_valid,
             dict(load="EINVAL", logged="1"), "unexplained_differences"),
            ("a device was left behind", ours_valid, dict(removed="0"), "devices_left"),
            ("a kernel warning during a case", ours_valid, dict(warn="1"), "kernel_warnings"),
            ("key wipe accepted on a live device", lambda ln: " target=crypt_lbs " in ln and
             " kind=msg:wipe-live " in ln, dict(steps="OK"), "unexpected_errnos"),
            ("data differs after a good key set", lambda ln: " target=crypt_lbs " in ln and
             " kind=msg:set-good " in ln, dict(data2="bad"), "data_errors"),
            ("stock is missing a case", stock_valid, dict(drop_="1"), "missing_results"),
        ]
        for what, pred, change, cat in plants:
            try:
                bad = plant(lines, pred, **change)
            except AssertionError as e:
                print("FAIL judge_test: %s: %s" % (what, e))
                fails += 1
                continue
            rc, js, out = judge(tmp, cases_path, bad)
            if rc == 0 or js.get(cat, 0) < 1:
                print(out[-2000:])
                print("FAIL judge_test: planted '%s': judge exit %d, %s=%s (expected a failure there)"
                      % (what, rc, cat, js.get(cat)))
                fails += 1
            else:
                print("ok   planted '%s': the judge fails (%s=%d)" % (what, cat, js[cat]))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
