#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""argfuzz.py: argument fuzzing of lbscrypt under ASan/UBSan (issue 11, section 3,
"Tool side"). Host only, and it touches no device.

    tests/harden/argfuzz.py LBSCRYPT [--count N] [--seed S] [--json OUT]

Reads the subcommands and each one's options from LBSCRYPT's own --help (so a new
option is fuzzed without editing this file), then runs COUNT command lines built
from them: real options with hostile values (empty, signs, overflow, junk, huge,
control bytes, paths that are not devices), options without their value, repeated,
unknown and misplaced options, and missing or extra positionals. Each run gets
/dev/null as standard input and, when this runs as root, the uid and gid of
nobody, so no mapping can be made or removed whatever the line says.

A run fails when the tool
- is killed by a signal or runs past the time limit (10 s);
- prints a sanitizer report (AddressSanitizer, LeakSanitizer, UBSan "runtime error");
- exits non-zero without exactly one line on standard error that starts with
  "lbscrypt: " (a refusal is one line and a non-zero exit; with --debug, the
  trace lines starting "# " are not counted).
Prints each failure with its command line, then a summary; exit status 1 on any.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

TIME_LIMIT = 10
NOBODY = 65534
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer")

VALUES = [
    "", " ", "0", "1", "-1", "+1", "-0", "00", "007", "512", "4096", "8192", "65536", "131072",
    "69632", "3000", "4294967295", "4294967296", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "18446744073709551616", "99999999999999999999999999999999",
    "0x1000", "1e3", "1.5", "4096abc", "abc", " 4096", "4096 ", "4k", "-4096", "--", "-",
    "%s%s%n", "\x01\x02", "\u00e9t\u00e9", "a" * 4096, "9" * 5000, "x" * 70000,
    "/dev/null", "/dev/zero", "/nonexistent/file", "/", "/proc/self/mem", ".", "..",
    "aes-xts-plain64", "aes-cbc-essiv:sha256", "aes", "aes-xts", "capi:xts(aes)-plain64",
    "cipher_null-ecb", "aes-cbc-lmk", "twofish-xts-plain64", "aes-xts-plain64:sha256",
    "sha256", "ripemd160", "plain", "md5", "nosuchhash", "1.30.0", "1.28.0", "99.99.99",
    "1..0", "1.2.3.4", "v1.30.0", "crypt", "crypt_lbs", "linear", "NAME", "a/b", "../x",
    "x" * 200, "CRYPT-PLAIN-x", "-v", "--help",
]


def parse_help(text):
    """(options, positionals) from CLI11's help: options as (names, takes_value)"""
    opts, pos, section = [], [], None
    for line in text.splitlines():
        if re.match(r"^(Options|Positionals|Subcommands):", line):
            section = line.split(":")[0]
            continue
        m = re.match(r"^  (\S.*?)(?:\s{2,}.*)?$", line)
        if not m or section is None:
            continue
        head = m.group(1).strip()
        if section == "Options":
            names = [n for n in re.split(r"[ ,]", head.split(" ")[0]) if n.startswith("-")]
            takes = bool(re.search(r"\b(TEXT|INT|UINT|FLOAT|NUMBER)\b", head))
            if names and "--help" not in names:
                opts.append((names, takes))
        elif section == "Positionals":
            pos.append(head.split(" ")[0])
    return opts, pos


def subcommands(tool):
    text = subprocess.run([tool, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False).stdout
    subs, on = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            on = True
            continue
        m = re.match(r"^  (\S+)", line)
        if on and m:
            subs.append(m.group(1))
    return subs


def grammar(tool):
    g = {}
    for sub in subcommands(tool):
        text = subprocess.run([tool, sub, "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True,
                              check=False).stdout
        g[sub] = parse_help(text)
    if not g:
        raise SystemExit("argfuzz: %s --help lists no subcommands" % tool)
    return g


def value(rng):
    return rng.choice(VALUES)


def line_for(rng, g):
    subs = sorted(g)
    r = rng.random()
    if r < 0.03:
        return [value(rng)] + [value(rng) for _ in range(rng.randint(0, 3))]
    sub = rng.choice(subs)
    opts, pos = g[sub]
    argv = [sub]
    for _ in range(rng.randint(0, 6)):
        if not opts:
            break
        names, takes = rng.choice(opts)
        name = rng.choice(names)
        k = rng.random()
        if takes and k < 0.08:
            argv.append(name)                       # value missing
        elif takes and k < 0.2 and name.startswith("--"):
            argv.append("%s=%s" % (name, value(rng)))
        elif takes:
            argv += [name, value(rng)]
        elif k < 0.05 and name.startswith("--"):
            argv.append("%s=%s" % (name, value(rng)))  # a flag given a value
        else:
            argv.append(name)
    if rng.random() < 0.1:
        argv.append(rng.choice(["--bogus", "-Z", "--cipher-", "---", "--=x"]))
    n = len(pos) + rng.choice([0, 0, 0, 0, -1, 1])
    argv += [value(rng) for _ in range(max(0, n))]
    if rng.random() < 0.15:
        rng.shuffle(argv[1:])
    return argv


def drop_privileges():
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def run(tool, argv, env):
    try:
        p = subprocess.run([tool] + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env, timeout=TIME_LIMIT,
                           preexec_fn=drop_privileges, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", "ran past %d s" % TIME_LIMIT, None
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return "crash", "killed by signal %d: %s" % (-p.returncode, err[-1500:]), p.returncode
    if SANITIZER.search(err):
        return "sanitizer", err[-3000:], p.returncode
    if p.returncode != 0:
        lines = err.rstrip("\n").split("\n") if err.strip() else []
        if any(x == "--debug" or x.startswith("--debug=") for x in argv):  # its trace: "# ..."
            lines = [ln for ln in lines if not ln.startswith("# ")]
        if len(lines) != 1 or not lines[0].startswith("lbscrypt: "):
            return "refusal", "exit %d with %d lines on stderr: %r" % (
                p.returncode, len(lines), err[:600]), p.returncode
    return None, None, p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    tool = os.path.abspath(a.tool)
    g = grammar(tool)
    rng = random.Random(a.seed)
    env = dict(os.environ, LC_ALL="C",
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99")
    counts = {"runs": 0, "exit_0": 0, "refused": 0, "crash": 0, "sanitizer": 0,
              "refusal": 0, "timeout": 0}
    codes, failures = {}, []
    for i in range(a.count):
        argv = line_for(rng, g)
        kind, detail, rc = run(tool, argv, env)
        counts["runs"] += 1
        if kind:
            counts[kind] += 1
            failures.append({"argv": argv, "kind": kind, "detail": detail})
            print("FAIL argfuzz #%d %s: lbscrypt %s\n  %s" % (
                i, kind, " ".join(repr(x) if (not x or " " in x) else x[:80] for x in argv),
                detail.replace("\n", "\n  ")))
        elif rc == 0:
            counts["exit_0"] += 1
        else:
            counts["refused"] += 1
        if rc is not None:
            codes[rc] = codes.get(rc, 0) + 1
    bad = counts["crash"] + counts["sanitizer"] + counts["refusal"] + counts["timeout"]
    print("argfuzz: %d command lines (seed %d) over %d subcommands: %d exit 0, %d refused "
          "(exit codes %s); %d crashes, %d sanitizer reports, %d refusals not one line, "
          "%d over %d s" % (counts["runs"], a.seed, len(g), counts["exit_0"], counts["refused"],
                            ", ".join("%d x%d" % kv for kv in sorted(codes.items())),
                            counts["crash"], counts["sanitizer"], counts["refusal"],
                            counts["timeout"], TIME_LIMIT))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(dict(counts, seed=a.seed, exit_codes=codes, failures=failures[:50],
                           subcommands=sorted(g)), f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
