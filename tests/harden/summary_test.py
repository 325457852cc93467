#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""summary_test.py: make harden's summary (tests/harden/harden_summary.py) counts what the
logs say and can fail. A clean run's files must give the figures they hold and pass;
then one bad record at a time must fail it, in the field named. Host only.

    tests/harden/summary_test.py
"""
import json
import os
import pathlib
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests/harden"))
import harden_summary  # noqa: E402

CLEAN = {
    "suite.txt": "PASS arm64-64k-debug compat 63s\n15 passed, 0 failed\n",
    "harden.log": "LBS-START faults 480\nFAULTS injected=27\nLBS-RESULT faults PASS 79\n"
                  "LEAKS ours=0 other=0\nLBS-RESULT leakscan PASS 17\n",
    "pressure.log": "boot noise\nok   ss=512: verified\nPRESSURE bytes=50331648 faults=4642\n"
                    "LBS-RESULT pressure PASS 57\nLEAKS ours=0 other=3\n",
    "teardown-engine.log": "ok   engine cipher: 500 cycles\nLBS-RESULT teardown PASS 3900\n"
                           "LEAKS ours=0 other=0\nLBS-RESULT leakscan PASS 17\n",
    "logwrites.log": "LBS-RESULT logwrites PASS 1800\n",
    "fuzz.json": json.dumps({"tables_tried": 5000, "messages_tried": 500, "unexpected_errnos": 0}),
    "argfuzz.json": json.dumps({"runs": 3000, "crash": 0, "sanitizer": 0, "refusal": 0, "timeout": 0}),
}


def run(files, tables=5000, parts=harden_summary.ALL_PARTS):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp)
        for name, text in files.items():
            (out / name).write_text(text)
        return harden_summary.summarise(out, 0, 0, 100, tables, 1, "k", parts)


def main():
    fails = 0
    summary, bad = run(CLEAN)
    want = {"fio_bytes_verified": 50331648, "faults_injected": 4642 + 27, "leaks": 0,
            "tables_tried": 5000, "messages_tried": 500, "tool_command_lines": 3000,
            "verify_errors": 0, "guest_test_failures": 0}
    got = {k: summary[k] for k in want}
    if bad or got != want:
        print("FAIL summary_test: a clean run gives %s (bad=%s), expected %s" % (got, bad, want))
        fails += 1
    else:
        print("ok   a clean run: %s" % got)
    plants = [
        ("a leak through this module", "pressure.log", "LEAKS ours=2 other=0\n", "leaks", 2),
        ("a failed verify", "pressure.log", "FAIL pressure.sh: ss=512: fio reported errors\n",
         "verify_errors", 1),
        ("a kernel report during lifecycle", "harden.log",
         "FAIL lifecycle.sh: kernel report: the kernel logged a bug report\n"
         "LBS-RESULT lifecycle FAIL 30 kernel-report\n", "guest_test_failures", 1),
        ("a failed teardown boot", "teardown-engine.log", "LBS-RESULT teardown FAIL 300\n",
         "guest_test_failures", 1),
        ("a failed log-writes sweep", "logwrites.log", "LBS-RESULT logwrites FAIL 90\n",
         "guest_test_failures", 1),
        ("a failed suite test", "suite.txt", "FAIL arm64-64k-debug ivlegacy 12s\n",
         "guest_test_failures", 1),
    ]
    for what, name, extra, field, n in plants:
        files = dict(CLEAN)
        files[name] = files[name] + extra
        summary, bad = run(files)
        if not bad or summary[field] != n:
            print("FAIL summary_test: %s: %s=%s, bad=%s (expected %s and a failure)"
                  % (what, field, summary[field], bad, n))
            fails += 1
        else:
            print("ok   %s: %s=%d, the run fails" % (what, field, n))
    files = dict(CLEAN)
    files["argfuzz.json"] = json.dumps({"runs": 3000, "crash": 0, "sanitizer": 0, "refusal": 0,
                                        "timeout": 0, "control": 1, "output": 0, "template": 0})
    summary, bad = run(files)
    if not bad or summary["tool_failures"] != 1:
        print("FAIL summary_test: a control byte on the tool's stderr: tool_failures=%s, bad=%s"
              % (summary["tool_failures"], bad))
        fails += 1
    else:
        print("ok   a control byte on the tool's stderr: tool_failures=1, the run fails")
    summary, bad = run(CLEAN, tables=6000)
    if not bad:
        print("FAIL summary_test: 5000 tables passed a run that asked for 6000")
        fails += 1
    else:
        print("ok   fewer tables than asked: the run fails")
    # a run of some parts (LBS_HARDEN_PARTS): no fuzzer, so no tables, passes; a
    # failure in a part it ran still fails it
    files = {k: v for k, v in CLEAN.items() if k != "fuzz.json"}
    summary, bad = run(files, parts="faults teardown-cpu")
    if bad or summary["parts"] != ["faults", "teardown-cpu"]:
        print("FAIL summary_test: a run of faults and teardown-cpu alone: bad=%s, parts %s"
              % (bad, summary["parts"]))
        fails += 1
    else:
        print("ok   a run of some parts without the fuzzer passes, its parts named")
    files["harden.log"] = files["harden.log"] + "LBS-RESULT faults FAIL 30\n"
    summary, bad = run(files, parts="faults teardown-cpu")
    if not bad:
        print("FAIL summary_test: a failed faults boot passed a run of some parts")
        fails += 1
    else:
        print("ok   a failed faults boot fails a run of some parts")
    summary, bad = run(files, parts="fuzz")
    if not bad:
        print("FAIL summary_test: a run with the fuzzer and no fuzz.json passed")
        fails += 1
    else:
        print("ok   a run with the fuzzer that tried no table fails")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
