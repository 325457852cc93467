#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""fuzz_judge.py: judge the table and message fuzzer's guest output.

    fuzz_judge.py --cases CASES --log GUEST-OUTPUT [--json OUT] [--ours crypt_lbs]
                  [--stock crypt]

CASES is what qemu/lib/fuzz_tables.py wrote, GUEST-OUTPUT what tests/guest/halves/fuzz.sh
printed (its CASE lines for ours and stock, and FUZZ-SUMMARY). The rules (as
Documentation/dm-crypt-lbs.rst gives them):

* every case of CASES ran on ours, and on stock unless it is marked stock-unsafe;
  every device was removed; no kernel WARNING/BUG was seen;
* a table ours refuses is refused with EINVAL, or with the errno stock gives for the
  same table when stock refuses it too (ENOMEM, ENXIO for a missing device...), and
  with a kernel message;
* a table ours loads reads back the data it wrote (before and after the reload),
  and its table read back loads again to the identical line; where stock loads it
  too, both put the same bytes on the device and read back the same table line;
* stock loads and ours refuses: only a documented deliberate difference, found
  from the table text (a capi: cipher that takes an IV without an IV mode, a key
  above 16384 bytes, words after the
  counted optional parameters, a hex key with an odd number of digits, lmk over a
  chaining mode other than CBC, a key count above 64, a key that does not split evenly by the key count, an unknown IV mode
  name on ecb) or from the case kind for numbers dm-crypt reads leniently or
  truncates (num-lenient:); for messages: a key set with a key of another size is
  refused, and a refused key set keeps the old key (stock truncates or forgets);
  ours loads and stock refuses: never (a case with a sector size above 4096, flag
  ss>4096, goes to stock with sector_size:4096 instead: tests/guest/halves/fuzz.sh; its
  errnos and messages are compared, its bytes and table line are not);
* messages: each step's errno as stock's; a refused message is EINVAL with a kernel
  message; key messages on a live device are refused; the data reads back after
  the steps (with another key: reads back different); a wiped key leaves the
  device suspended, as stock.

Prints a summary and every unexpected case, writes JSON (--json) with tables_tried,
messages_tried, unexpected_errnos, silent_refusals, data_errors, reread_errors,
unexplained_differences, ..., and the list "unexpected". Exit status 1 when any
case is unexpected (or the output is incomplete), 0 otherwise.
"""
import argparse
import collections
import json
import re
import sys

CASE_RE = re.compile(r'^CASE (.*?) msg="(.*)"\s*$')
KNOWN_IV = ("plain", "plain64", "plain64be", "essiv", "benbi", "null", "eboiv", "lmk", "tcw",
            "random", "elephant")
BIG_KEY = 16384


def read_cases(path):
    cases = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            fld = line.split("\t")
            c = {"id": fld[0], "kind": fld[1], "flags": set(fld[3].split(",")) - {"-"},
                 "op": fld[4], "length": fld[5], "params": "" if fld[6] == "<empty>" else fld[6],
                 "steps": fld[7].split("|") if len(fld) > 7 else []}
            cases[c["id"]] = c
    return cases


def read_log(path, ours, stock):
    rows = {ours: {}, stock: {}}
    summary = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.startswith("FUZZ-SUMMARY "):
                summary = json.loads(line[len("FUZZ-SUMMARY "):])
                continue
            m = CASE_RE.match(line)
            if not m:
                continue
            row = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
            row["msg"] = m.group(2)
            if row.get("target") in rows:
                rows[row["target"]][row["id"]] = row
    return rows, summary


def read_logs(paths, ours, stock):
    """read_log over each path; the rows merged, the summaries' numbers added up
    (None unless every log has its FUZZ-SUMMARY)"""
    rows, summary = {ours: {}, stock: {}}, {}
    for path in paths:
        r, s = read_log(path, ours, stock)
        for t in rows:
            rows[t].update(r[t])
        if s is None or summary is None:
            summary = None
            continue
        for k, v in s.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                summary[k] = summary.get(k, 0) + v
            elif k not in summary:
                summary[k] = v
            elif summary[k] != v:
                summary[k] = "%s, %s" % (summary[k], v)
    return rows, summary


def key_bytes(tok):
    """the key size a key field asks for (None when it cannot say)"""
    if tok.startswith(":"):
        m = re.match(r"^:\+?0*(\d+):", tok)
        return int(m.group(1)) if m else None
    if tok == "-":
        return 0
    return len(tok) // 2


def deliberate(case):
    """why ours may refuse what stock loads (None: no documented reason)"""
    toks = case["params"].split()
    kind = case["kind"]
    if kind.startswith("num-lenient:"):
        return "number dm-crypt reads leniently or truncates; ours is strict"
    if not toks:
        return None
    spec = toks[0]
    if len(toks) > 1:
        kb = key_bytes(toks[1])
        if kb is not None and kb > BIG_KEY:
            return "key above 16384 bytes"
    # words after the counted optional parameters: stock ignores them
    if len(toks) > 6 and re.fullmatch(r"\d+", toks[5]) and len(toks) > 6 + int(toks[5]):
        return "words after the counted optional parameters (stock ignores them)"
    if len(toks) > 1 and not toks[1].startswith(":") and toks[1] != "-" and len(toks[1]) % 2:
        return "hex key with an odd number of digits (stock drops the last)"
    if not spec.startswith("capi:"):
        head = spec.split("-", 1)[0]
        if ":" in head:
            count = head.split(":", 1)[1]
            if re.fullmatch(r"\d+", count) and int(count) > 64:
                return "key count above 64"
            kb = key_bytes(toks[1]) if len(toks) > 1 else None
            if re.fullmatch(r"\d+", count) and int(count) and kb is not None and kb % int(count) \
                    and "lmk" not in spec:
                return "key that does not split evenly by the key count (stock ignores the rest)"
        parts = spec.split("-")
        if len(parts) >= 3 and parts[1] == "ecb" and parts[2].split(":")[0] not in KNOWN_IV:
            return "unknown IV mode on a cipher without IV (stock ignores any name)"
    if spec.startswith("capi:"):
        body = spec[5:]
        inner, _, iv = body.rpartition(")")
        ivmode = iv[1:] if iv.startswith("-") else ""
        if iv == "" and not inner.startswith("ecb(") and "(" in inner:
            return "capi: cipher that takes an IV without an IV mode"
        # both targets split "-ivmode:ivopts" at the last ':', so the mode of
        # "-essiv:sha256:x" is "essiv:sha256", which neither knows
        if body.startswith("ecb(") and ivmode and ivmode.rsplit(":", 1)[0] not in KNOWN_IV:
            return "unknown IV mode on a cipher without IV (stock ignores any name)"
        chain = body.split("(", 1)[0]
    else:
        ivmode = spec.split("-", 2)[2] if spec.count("-") >= 2 else ""
        chain = spec.split("-")[1] if "-" in spec else ""
    if ivmode.split(":")[0] == "lmk" and chain not in ("cbc", "ecb"):
        return "lmk over a chaining mode other than CBC (stock writes what it cannot read back)"
    return None


def deliberate_steps(case, ours, stock):
    """why ours' message steps may differ from stock's (None: no documented reason)"""
    toks = case["params"].split()
    table_key = key_bytes(toks[1]) if len(toks) > 1 else None
    refused_set = False
    for st, o, s in zip(case["steps"], ours, stock):
        if o == s:
            if st.startswith("key set") and o != "OK":
                refused_set = True
            continue
        words = st.split()
        if st.startswith("key set") and o == "EINVAL" and s == "OK" and len(words) == 3 and \
                not words[2].startswith(":") and table_key is not None and \
                (len(words[2]) // 2 != table_key or len(words[2]) % 2):
            refused_set = True      # stock truncates a longer key or drops an odd digit
            continue
        if refused_set and o == "OK" and s == "EAGAIN" and st == "resume":
            continue                # stock forgot the key on the refused key set; ours kept it
        return None
    return "key set: a key of another size or an odd number of digits is refused and the old key kept " \
        "(stock truncates or forgets)"


class Judge:
    def __init__(self):
        self.counts = collections.Counter()
        self.unexpected = []
        self.deliberate = collections.Counter()

    def bad(self, case, category, detail):
        self.counts[category] += 1
        self.unexpected.append({"id": case["id"], "kind": case["kind"], "category": category,
                                "detail": detail, "params": case["params"][:300],
                                "steps": [s[:80] for s in case["steps"]]})

    def refusal(self, case, o, s):
        """ours refused (a table, or a message step): errno and message"""
        if not o["logged"] == "1":
            self.bad(case, "silent_refusals", "ours refused (%s at %s) without a kernel message"
                     % (o["load"], o["stage"]))
        if o["load"] != "EINVAL" and not (s and s["load"] == o["load"]):
            self.bad(case, "unexpected_errnos", "ours refused with %s at %s (stock: %s); expected "
                     "EINVAL or stock's errno: %s" % (o["load"], o["stage"], s["load"] if s else "not run",
                                                      o["msg"]))

    def table(self, case, o, s):
        if o["load"] == "OK":
            if o["data"] not in ("ok", "-") or o["data2"] not in ("ok", "-"):
                self.bad(case, "data_errors", "loaded, but the data read back %s (after the reload: %s)"
                         % (o["data"], o["data2"]))
            if o["reread"] != "same":
                self.bad(case, "reread_errors", "the table read back, loaded again, gave %s" % o["reread"])
            if s is None:
                return
            twin = "ss>4096" in case["flags"]    # stock ran it with sector_size:4096
            if s["load"] == "OK" and twin:
                self.deliberate["sector size above 4096 (stock ran it with 4096)"] += 1
            elif s["load"] == "OK":
                if o["data"] == "ok" and s["data"] == "ok" and o["ct"] != s["ct"]:
                    self.bad(case, "data_errors", "ours and stock wrote different bytes to the device "
                             "(ciphertext %s vs %s)" % (o["ct"], s["ct"]))
                if o["tab"] != s["tab"]:
                    self.bad(case, "unexplained_differences", "the table ours reads back differs from "
                             "stock's (%s vs %s)" % (o["tab"], s["tab"]))
            else:
                self.bad(case, "unexplained_differences", "ours loads it, stock refuses it with %s: %s"
                         % (s["load"], s["msg"]))
            return
        self.refusal(case, o, s)
        if s is not None and s["load"] == "OK" and "ss>4096" in case["flags"] and \
                re.search(r"not aligned to h/w logical block size|multiple of sector_size|"
                          r"not a multiple of", o["msg"]):
            # stock ran the twin with sector_size:4096: an alignment that holds for 4096
            # and not for the larger size is the same rule, not a difference
            self.deliberate["alignment to a sector size above 4096 (stock ran it with 4096)"] += 1
        elif s is not None and s["load"] == "OK":
            why = deliberate(case)
            if why:
                self.deliberate[why] += 1
            else:
                self.bad(case, "unexplained_differences", "stock loads it, ours refuses it with %s "
                         "(no documented difference): %s" % (o["load"], o["msg"]))

    def message(self, case, o, s):
        kind = case["kind"]
        if o["load"] != "OK":
            self.bad(case, "unexpected_errnos", "the message case's table did not load on ours: %s %s"
                     % (o["load"], o["msg"]))
            return
        steps = o["steps"].split(",")
        if len(steps) != len(case["steps"]):
            self.bad(case, "unexpected_errnos", "ran %d steps of %d" % (len(steps), len(case["steps"])))
            return
        failed = [i for i, e in enumerate(steps) if e != "OK"]
        for i in failed:
            st = case["steps"][i]
            ss = s["steps"].split(",") if s else []
            sv = ss[i] if i < len(ss) else None
            if steps[i] != "EINVAL" and steps[i] != sv and st not in ("suspend", "resume"):
                self.bad(case, "unexpected_errnos", "step %d (%s): %s (stock: %s)" % (i, st[:40], steps[i], sv))
        if failed and o["logged"] != "1":
            self.bad(case, "silent_refusals", "steps %s refused without a kernel message" % o["steps"])
        live_keymsg = {"msg:wipe-live", "msg:set-live"} | {k for k in [kind] if k.startswith("msg:set-bad-live")}
        if kind in live_keymsg and steps[0] != "EINVAL":
            self.bad(case, "unexpected_errnos", "a key message on a live device gave %s, not EINVAL" % steps[0])
        if kind in ("msg:set-good", "msg:wipe-set") and failed:
            self.bad(case, "unexpected_errnos", "a good key set while suspended: steps %s" % o["steps"])
        if kind == "msg:wipe-resume" and (steps[-1] == "OK" or o["final"] != "suspended"):
            self.bad(case, "unexpected_errnos", "resume after key wipe: %s, final %s (must stay suspended)"
                     % (steps[-1], o["final"]))
        want = "bad" if kind.startswith("msg:set-other") else "ok"
        if o["final"] == "live" and o["data2"] != want:
            self.bad(case, "data_errors", "after the steps the data read back %s, expected %s"
                     % (o["data2"], want))
        if s is not None:
            if s["load"] != "OK":
                self.bad(case, "unexplained_differences", "stock did not load the message case's table: %s"
                         % s["load"])
                return
            if s["steps"] != o["steps"] or s["final"] != o["final"]:
                why = deliberate_steps(case, steps, s["steps"].split(","))
                if why:
                    self.deliberate[why] += 1
                else:
                    self.bad(case, "unexplained_differences", "steps ours %s (final %s), stock %s (final %s)"
                             % (o["steps"], o["final"], s["steps"], s["final"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("--log", required=True, action="append",
                    help="a guest log; give it twice when ours and stock ran in two boots")
    ap.add_argument("--json")
    ap.add_argument("--ours", default="crypt_lbs")
    ap.add_argument("--stock", default="crypt")
    a = ap.parse_args()
    cases = read_cases(a.cases)
    rows, summary = read_logs(a.log, a.ours, a.stock)
    j = Judge()
    incomplete = []
    if summary is None:
        incomplete.append("no FUZZ-SUMMARY line: the guest run did not finish")
    for cid, case in cases.items():
        o = rows[a.ours].get(cid)
        s = rows[a.stock].get(cid)
        if o is None:
            j.bad(case, "missing_results", "no result for ours")
            continue
        if "stock-unsafe" not in case["flags"] and s is None:
            j.bad(case, "missing_results", "no result for stock")
        if "stock-unsafe" in case["flags"] and s is not None:
            j.bad(case, "stock_fed_unsafe", "a stock-unsafe case was fed to stock")
        if o.get("kind") != case["kind"]:
            j.bad(case, "missing_results", "the result's kind %s is not the case's" % o.get("kind"))
            continue
        if o["removed"] != "1":
            j.bad(case, "devices_left", "ours: the device could not be removed")
        if s is not None and s["removed"] != "1":
            j.bad(case, "devices_left", "stock: the device could not be removed")
        if o["warn"] != "0" or (s is not None and s["warn"] != "0"):
            j.bad(case, "kernel_warnings", "a WARNING/BUG/KASAN/lockdep line was logged during the case")
        if case["op"] == "table":
            j.counts["tables_tried"] += 1
            j.counts["tables_loaded"] += o["load"] == "OK"
            j.counts["stock_tables_tried"] += s is not None
            j.counts["stock_tables_loaded"] += s is not None and s["load"] == "OK"
            j.table(case, o, s)
        else:
            j.counts["messages_tried"] += 1
            j.message(case, o, s)
    cats = ["unexpected_errnos", "silent_refusals", "data_errors", "reread_errors",
            "unexplained_differences", "devices_left", "kernel_warnings", "missing_results",
            "stock_fed_unsafe"]
    out = {k: j.counts[k] for k in ["tables_tried", "tables_loaded", "stock_tables_tried",
                                     "stock_tables_loaded", "messages_tried"] + cats}
    if summary:
        for k in ("devices_left", "kernel_warnings"):
            out[k] += summary.get(k, 0)
    out["deliberate_differences"] = dict(j.deliberate)
    out["guest_summary"] = summary
    out["incomplete"] = incomplete
    out["unexpected"] = j.unexpected
    bad = sum(out[k] for k in cats) + len(incomplete)
    out["ok"] = bad == 0
    print("fuzz-judge: %d tables (%d loaded on ours; stock %d tried, %d loaded), %d message cases"
          % (out["tables_tried"], out["tables_loaded"], out["stock_tables_tried"],
             out["stock_tables_loaded"], out["messages_tried"]))
    for why, n in sorted(j.deliberate.items()):
        print("fuzz-judge: deliberate difference x%d: %s" % (n, why))
    for k in cats:
        print("fuzz-judge: %-24s %d" % (k, out[k]))
    for msg in incomplete:
        print("fuzz-judge: INCOMPLETE: %s" % msg)
    groups = collections.Counter((u["category"], ":".join(u["kind"].split(":")[:2]))
                                 for u in j.unexpected)
    out["unexpected_by_kind"] = ["%s %s x%d" % (c, k, n) for (c, k), n in sorted(groups.items())]
    for line in out["unexpected_by_kind"]:
        print("fuzz-judge: group %s" % line)
    for u in j.unexpected[:200]:
        print("fuzz-judge: UNEXPECTED %s [%s] %s: %s\n      table: %s%s"
              % (u["id"], u["kind"], u["category"], u["detail"], u["params"][:200],
                 ("\n      steps: " + " | ".join(u["steps"])) if u["steps"] else ""))
    if len(j.unexpected) > 200:
        print("fuzz-judge: ... %d more in the JSON" % (len(j.unexpected) - 200))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    print("fuzz-judge: %s" % ("PASS" if bad == 0 else "FAIL (%d unexpected)" % bad))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
