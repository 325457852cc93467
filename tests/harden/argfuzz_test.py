#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""argfuzz_test.py: the argument fuzzer's judge (tests/harden/argfuzz.py, run()) on a fake
tool that answers as told: check's "no" in its two shapes passes, and each planted bad
answer around it (another shape, a control byte, a "yes", another exit status, another
subcommand) must fail as a refusal. Host only; runs the fake as nobody when root, as the
fuzzer runs lbscrypt.

    tests/harden/argfuzz_test.py
"""
import os
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests/harden"))
import argfuzz  # noqa: E402

FAKE = """#!/bin/sh
printf '%b' "$FAKE_OUT"
printf '%b' "$FAKE_ERR" >&2
exit "$FAKE_RC"
"""
REPORT = ("crypt target:             v1.28.0\\npage size:                65536\\n"
          "largest plain sector size: 4096\\nlargest LUKS sector size:  4096\\n"
          "sector size 65536 (plain):     refused: this kernel's crypt is v1.28.0; "
          "sector_size 65536 needs v1.30.0: load dm-crypt-lbs\\n")
KERNEL = ("kernel 7.3.4-arm64: its own dm_crypt is crypt v1.29.0 (/lib/modules/7.3.4-arm64/"
          "kernel/drivers/md/dm-crypt.ko.xz), below v1.30.0: dm_crypt_lbs serves crypt there "
          "(sector sizes above 4096 need v1.30.0)\\n")
NO_JSON = '{"hand_over":false,"in_tree":"module","kernel":"7.3.4-arm64"}\\n'
CHECK = ["check", "--kernel", "7.3.4-arm64"]

# (what, argv, stdout, stderr, exit status, the kind run() must give: None passes)
CASES = [
    ("check's report ending in its refusal", ["check", "--sector-size", "65536"], REPORT, "",
     1, None),
    ("check --kernel's line", CHECK, KERNEL, "", 1, None),
    ("check --kernel --json saying no", CHECK + ["--json"], NO_JSON, "", 1, None),
    ("check with --debug's trace and its line", CHECK + ["--debug"], KERNEL,
     "# reading /lib/modules\\n", 1, None),
    ("an error of check's, one line on stderr", CHECK, "", "lbscrypt: no kernel x\\n", 1, None),
    ("check's exit 1 with other words on stdout", CHECK, "kernel x: fine\\n", "", 1, "refusal"),
    ("check's exit 1 with a form feed in its line", CHECK,
     KERNEL.replace("7.3.4-arm64:", "7.3.4\\f-arm64:"), "", 1, "refusal"),
    ("check's exit 1 with JSON saying yes", CHECK + ["--json"],
     NO_JSON.replace("false", "true"), "", 1, "refusal"),
    ("check's exit 1 with two JSON documents", CHECK + ["--json"], NO_JSON + NO_JSON, "", 1,
     "refusal"),
    ("check's exit 1 with nothing at all", CHECK, "", "", 1, "refusal"),
    ("check's verdict with exit 4", CHECK, KERNEL, "", 4, "refusal"),
    ("table's exit 1 with check's verdict", ["table", "--size", "8"], REPORT, "", 1, "refusal"),
]


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        tool = os.path.join(tmp, "fake-lbscrypt")
        with open(tool, "w") as f:
            f.write(FAKE)
        os.chmod(tool, 0o755)
        for what, argv, out, err, rc, want in CASES:
            env = dict(os.environ, FAKE_OUT=out, FAKE_ERR=err, FAKE_RC=str(rc))
            kind, detail, _ = argfuzz.run(tool, argv, env)
            if kind != want:
                failed += 1
                print("FAIL argfuzz_test: %s: judged %s (%s), expected %s" % (
                    what, kind, detail, want))
    print("argfuzz_test: %d cases, %d failed" % (len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
