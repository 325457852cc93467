#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""argfuzz.py: argument fuzzing of lbscrypt under ASan/UBSan. Host only, and it touches no device.

    tests/harden/argfuzz.py LBSCRYPT [--count N] [--seed S] [--json OUT]

Reads the subcommands and each one's options from LBSCRYPT's own --help (so a new
option is fuzzed without editing this file), then runs COUNT command lines built
from them: real options with hostile values (empty, signs, overflow, junk, huge,
control bytes, paths that are not devices), options without their value, repeated,
unknown and misplaced options, and missing or extra positionals; a tenth of the
values get a whitespace or control byte put into them. Then INJECT lines from
templates the tool accepts offline (`table` and `check` with --assume-version, a
key file this makes), each with one such byte put into one word (every word is checked before it reaches a table line). Each run gets
/dev/null as standard input and, when this runs as root, the uid and gid of
nobody, so no mapping can be made or removed whatever the line says.

A run fails when the tool
- is killed by a signal or runs past the time limit (10 s);
- prints a sanitizer report (AddressSanitizer, LeakSanitizer, UBSan "runtime error");
- exits non-zero without exactly one line on standard error that starts with
  "lbscrypt: " ("lbscrypt-generator: " for generate-units; a refusal is one line and a non-zero exit; with --debug, the
  trace lines starting "# " are not counted); the one exception is check's "no"
  (lbscrypt(8), "Exit status"): exit 1, nothing on standard error, and on standard
  output the report ending in its refusal line, or JSON with "loads" or "hand_over"
  false, in printable ASCII;
- writes a control byte anywhere on standard error but the line ends (a value
  echoed into a message is escaped, so it cannot forge lines or drive a terminal);
- for a template line: exits non-zero with anything on standard output, or exits 0
  with output that differs in shape from the template's own (a table line: one
  line of printable ASCII, single spaces, the template's word count; JSON: one
  document). Every template must first be accepted as it is, or the run fails.
Then the STREAMS phase runs the templates with their standard
streams as a shell can leave them, and a FIFO key file:
- standard input closed (0<&-): a template that reads its key from a file gives its
  usual answer; one that reads a passphrase is refused with one line, never a table
  made from whatever the tool opened next on fd 0;
- standard output closed (1>&-) or /dev/full: exit non-zero, one line on standard
  error that says standard output cannot be written;
- standard error closed (2>&-): the answer of the template is unchanged;
- a FIFO key file whose writer writes the key and exits at once (10 runs): the line
  comes within the time limit (the key file is opened once, its writer never lost).
Prints each failure with its command line, then a summary; exit status 1 on any.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

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

# Bytes that would end, split or hide a word of a table line or a message line.
BREAKERS = [" ", "\t", "\n", "\r", "\v", "\f", "\x1b", "\x7f", "\x01", "\x1f"]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
KEY = "@KEY@"   # replaced by the path of a key file this makes
DEV = "/dev/lbs-argfuzz-none"
# Lines the tool accepts without a device or a kernel (as nobody); `shape` is what a
# good answer looks like: a table line ("line") or JSON ("json").
TEMPLATES = [
    ("line", ["table", "--assume-version", "1.30.0", "--assume-page-size", "65536", "--size", "256",
              "--key-file", KEY, "--cipher", "aes-xts-plain64", "--key-size", "512",
              "--sector-size", "65536", "--offset", "128", "--skip", "0", "--allow-discards",
              "--perf-no_read_workqueue", "--target", "crypt_lbs", DEV]),
    ("line", ["table", "--assume-version", "1.30.0", "-b", "64", "-d", KEY, "-l", "32",
              "--keyfile-offset", "0", "-c", "aes-cbc-essiv:sha256", "-s", "256", "-p", "8",
              "--iv-large-sectors", "--sector-size", "4096", DEV]),
    ("line", ["table", "-q", "--assume-version", "1.30.0", "--size", "8", "--hash", "sha256",
              "--key-file", KEY, "--cipher", "capi:xts(aes)-plain64", DEV]),
    ("json", ["table", "--json", "--assume-version", "1.30.0", "--assume-page-size", "16384",
              "--size", "64", "--key-file", KEY, "--sector-size", "16384", DEV]),
    ("json", ["check", "--json", "--assume-version", "1.30.0", "--assume-page-size", "65536",
              "--sector-size", "65536", "--target", "crypt"]),
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


def inject(rng, word):
    """word with one breaker put at its start, its end or inside, or replacing it"""
    b = rng.choice(BREAKERS)
    at = rng.choice([0, len(word), rng.randint(0, len(word))])
    return b if rng.random() < 0.1 else word[:at] + b + word[at:]


def value(rng):
    v = rng.choice(VALUES)
    return inject(rng, v) if rng.random() < 0.1 else v


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


def shape_error(shape, out, words):
    """why OUT (bytes) is not an answer of SHAPE with WORDS words, or None"""
    text = out.decode("utf-8", "replace")
    if shape == "json":
        try:
            json.loads(text)
        except ValueError as e:
            return "standard output is not one JSON document (%s): %r" % (e, text[:300])
        return None
    if not re.fullmatch(r"[\x21-\x7e]+( [\x21-\x7e]+)*\n", text):
        return "standard output is not one line of printable words: %r" % text[:300]
    if words is not None and len(text.split()) != words:
        return "the table line has %d words, the template's %d: %r" % (
            len(text.split()), words, text[:300])
    return None


VERDICT_LINE = re.compile(
    r"sector size \d+ \((plain|luks)\): +refused: [\x20-\x7e]+"
    r"|kernel [\x21-\x7e]+: [\x20-\x7e]+: dm_crypt_lbs serves crypt there [\x20-\x7e]+")


def verdict_error(out):
    """why OUT (bytes) is not check's "no" on standard output (lbscrypt(8), "Exit status"),
    or None: JSON with "loads" or "hand_over" false, or the report whose last line is the
    refusal (or the kernel's line), printable ASCII"""
    text = out.decode("utf-8", "replace")
    if CONTROL.search(text):
        return "a control byte on standard output: %r" % text[:300]
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            return "standard output is not one JSON document (%s): %r" % (e, text[:300])
        if doc.get("loads") is False or doc.get("hand_over") is False:
            return None
        return "its JSON does not say no: %r" % text[:300]
    lines = text.split("\n")
    if len(lines) < 2 or lines[-1] != "" or not VERDICT_LINE.fullmatch(lines[-2]):
        return "standard output is not check's verdict: %r" % text[:300]
    return None


def closing(fds):
    """a preexec_fn that closes FDS (as `0<&-` does) and drops privileges"""
    def preexec():
        for fd in fds:
            os.close(fd)
        drop_privileges()
    return preexec


def run(tool, argv, env, shape=None, words=None, close=(), stdout=subprocess.PIPE):
    try:
        p = subprocess.run([tool] + argv, stdin=subprocess.DEVNULL, stdout=stdout,
                           stderr=subprocess.PIPE, env=env, timeout=TIME_LIMIT,
                           preexec_fn=closing(close), check=False)
    except subprocess.TimeoutExpired:
        return "timeout", "ran past %d s" % TIME_LIMIT, None
    except ValueError as e:        # a NUL byte cannot be an argument
        raise SystemExit("argfuzz: bad command line %r: %s" % (argv, e))
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return "crash", "killed by signal %d: %s" % (-p.returncode, err[-1500:]), p.returncode
    if SANITIZER.search(err):
        return "sanitizer", err[-3000:], p.returncode
    if any(CONTROL.search(line) for line in err.split("\n")):
        return "control", "a control byte on standard error: %r" % err[:600], p.returncode
    if shape and p.returncode != 0 and p.stdout:
        return "output", "exit %d after writing %r" % (p.returncode, p.stdout[:300]), p.returncode
    if shape and p.returncode == 0 and stdout == subprocess.PIPE:
        why = shape_error(shape, p.stdout, words)
        if why:
            return "output", why, p.returncode
    if p.returncode != 0:
        lines = err.rstrip("\n").split("\n") if err.strip() else []
        if any(x == "--debug" or x.startswith("--debug=") for x in argv):  # its trace: "# ..."
            lines = [ln for ln in lines if not ln.startswith("# ")]
        if argv[:1] == ["check"] and not lines and p.returncode == 1:
            why = verdict_error(p.stdout)
            if why:
                return "refusal", "exit 1, nothing on stderr, and %s" % why, p.returncode
            return None, None, p.returncode
        # generate-units speaks as the generator it is at boot
        prefixes = ("lbscrypt: ", "lbscrypt-generator: ") if "generate-units" in argv else (
            "lbscrypt: ",)
        if len(lines) != 1 or not lines[0].startswith(prefixes):
            return "refusal", "exit %d with %d lines on stderr: %r" % (
                p.returncode, len(lines), err[:600]), p.returncode
    return None, None, p.returncode


def report(i, kind, argv, detail):
    print("FAIL argfuzz #%s %s: lbscrypt %s\n  %s" % (
        i, kind, " ".join(repr(x) if (not x or not x.isprintable() or " " in x) else x[:80]
                          for x in argv),
        detail.replace("\n", "\n  ")))


def templates(keydir):
    """TEMPLATES with the key file made: [(shape, argv)]"""
    key = os.path.join(keydir, "key")
    with open(key, "wb") as f:
        f.write(os.urandom(64))
    os.chmod(keydir, 0o755)
    os.chmod(key, 0o644)
    return [(shape, [key if w == KEY else w for w in argv]) for shape, argv in TEMPLATES]


# A passphrase template: the key comes from standard input.
PASSPHRASE = ["table", "--assume-version", "1.30.0", "--assume-page-size", "65536", "--size", "8",
              "--cipher", "aes-xts-plain64", "--key-size", "256", "--hash", "sha256", DEV]
STREAM_WRITE_ERROR = "lbscrypt: cannot write to standard output: "


def fifo_writer(path, data, deadline):
    """writes DATA into the FIFO at PATH once a reader has it open, then closes it (as
    `printf KEY > fifo &` does); gives up at DEADLINE (time.monotonic()) if none comes"""
    while time.monotonic() < deadline:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:        # ENXIO: no reader yet
            time.sleep(0.005)
            continue
        try:
            os.set_blocking(fd, True)
            os.write(fd, data)
        except OSError:
            pass
        finally:
            os.close(fd)
        return


def raw(tool, argv, env, close=(), stdout=subprocess.PIPE):
    """the finished process of one run, its streams as CLOSE and STDOUT leave them"""
    try:
        return subprocess.run([tool] + argv, stdin=subprocess.DEVNULL, stdout=stdout,
                              stderr=subprocess.PIPE, env=env, timeout=TIME_LIMIT,
                              preexec_fn=closing(close), check=False)
    except subprocess.TimeoutExpired:
        return None


def one_line_refusal(p, start, label):
    """(kind, detail) unless P exited non-zero with one line on stderr starting START"""
    if p is None:
        return "timeout", "%s: ran past %d s" % (label, TIME_LIMIT)
    err = p.stderr.decode("utf-8", "replace")
    lines = err.rstrip("\n").split("\n") if err.strip() else []
    # a template's own warnings (cryptsetup's, printed as it prints them) come before
    lines = [ln for ln in lines if not ln.startswith("WARNING: ")]
    if SANITIZER.search(err) or p.returncode < 0:
        return "sanitizer", "%s: exit %d: %s" % (label, p.returncode, err[-3000:])
    if p.returncode == 0 or len(lines) != 1 or not lines[0].startswith(start):
        return "streams", "%s: exit %d, stderr %r" % (label, p.returncode, err[:600])
    return None, None


def streams(tool, env, lines, keydir, count):
    """the STREAMS phase: [(id, argv, kind, detail, rc)] of every run"""
    results = []
    for n, (shape, argv) in enumerate(lines):
        for label, close in (("0<&-", (0,)), ("2>&-", (2,))):
            kind, detail, rc = run(tool, argv, env, shape, close=close)
            if not kind and rc != 0:
                kind, detail = "streams", "exit %d with %s" % (rc, label)
            results.append(("s%d %s" % (n, label), argv, kind, detail, rc))
        p = raw(tool, argv, env, close=(1,))
        kind, detail = one_line_refusal(p, STREAM_WRITE_ERROR, "1>&-")
        results.append(("s%d 1>&-" % n, argv, kind, detail, p.returncode if p else None))
        with open("/dev/full", "wb") as full:
            p = raw(tool, argv, env, stdout=full)
        kind, detail = one_line_refusal(p, STREAM_WRITE_ERROR, ">/dev/full")
        results.append(("s%d >/dev/full" % n, argv, kind, detail, p.returncode if p else None))
    p = raw(tool, PASSPHRASE, env, close=(0,))
    kind, detail = one_line_refusal(p, "lbscrypt: standard input is closed", "0<&-")
    if not kind and p.stdout:
        kind, detail = "streams", "0<&-: a table from no passphrase: %r" % p.stdout[:300]
    results.append(("s passphrase 0<&-", PASSPHRASE, kind, detail, p.returncode if p else None))
    fifo = os.path.join(keydir, "fifo")
    os.mkfifo(fifo, 0o644)
    key = os.urandom(64)
    shape, argv = lines[0]
    argv = [fifo if w.endswith("/key") else w for w in argv]
    for i in range(count):
        writer = threading.Thread(target=fifo_writer,
                                  args=(fifo, key, time.monotonic() + TIME_LIMIT))
        writer.start()
        kind, detail, rc = run(tool, argv, env, shape)
        writer.join()
        if not kind and rc != 0:
            kind, detail = "streams", "a FIFO key file whose writer exits: exit %d" % rc
        results.append(("s fifo%d" % i, argv, kind, detail, rc))
    os.unlink(fifo)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--inject", type=int, default=None,
                    help="template lines with one byte put into one word (default: COUNT/2)")
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
              "refusal": 0, "timeout": 0, "control": 0, "output": 0, "template": 0,
              "streams": 0}
    codes, failures = {}, []

    def count(i, argv, kind, detail, rc):
        counts["runs"] += 1
        if kind:
            counts[kind] += 1
            failures.append({"argv": argv, "kind": kind, "detail": detail})
            report(i, kind, argv, detail)
        elif rc == 0:
            counts["exit_0"] += 1
        else:
            counts["refused"] += 1
        if rc is not None:
            codes[rc] = codes.get(rc, 0) + 1

    for i in range(a.count):
        argv = line_for(rng, g)
        count(i, argv, *run(tool, argv, env))

    injected = {"lines": 0, "accepted": 0}
    with tempfile.TemporaryDirectory() as keydir:
        lines = templates(keydir)
        words = []
        for n, (shape, argv) in enumerate(lines):
            kind, detail, rc = run(tool, argv, env, shape)
            p = subprocess.run([tool] + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, preexec_fn=drop_privileges,
                               check=False)
            if kind or rc != 0:
                why = detail or "exit %d: %r" % (rc, p.stderr.decode("utf-8", "replace")[:300])
                count("t%d" % n, argv, "template", "the template itself is not accepted: " + why,
                      rc)
            words.append(len(p.stdout.split()) if shape == "line" else None)
        for i in range(a.inject if a.inject is not None else a.count // 2):
            n = rng.randrange(len(lines))
            shape, argv = lines[n]
            argv = list(argv)
            at = rng.randrange(len(argv))
            argv[at] = inject(rng, argv[at])
            kind, detail, rc = run(tool, argv, env, shape, words[n])
            injected["lines"] += 1
            injected["accepted"] += 1 if rc == 0 and not kind else 0
            count("i%d" % i, argv, kind, detail, rc)
        stream_runs = streams(tool, env, lines, keydir, 10)
        for i, argv, kind, detail, rc in stream_runs:
            count(i, argv, kind, detail, rc)

    bad = sum(counts[k] for k in ("crash", "sanitizer", "refusal", "timeout", "control",
                                  "output", "template", "streams"))
    print("argfuzz: %d command lines (seed %d) over %d subcommands, %d of them templates with "
          "a byte put in (%d accepted): %d exit 0, %d refused (exit codes %s); %d crashes, "
          "%d sanitizer reports, %d refusals not one line, %d control bytes on stderr, "
          "%d bad outputs, %d templates refused, %d over %d s; %d stream and FIFO runs, %d failed" % (
              counts["runs"], a.seed, len(g), injected["lines"], injected["accepted"],
              counts["exit_0"], counts["refused"],
              ", ".join("%d x%d" % kv for kv in sorted(codes.items())),
              counts["crash"], counts["sanitizer"], counts["refusal"], counts["control"],
              counts["output"], counts["template"], counts["timeout"], TIME_LIMIT,
              len(stream_runs), sum(1 for r in stream_runs if r[2])))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(dict(counts, seed=a.seed, exit_codes=codes, injected=injected,
                           stream_runs=len(stream_runs),
                           failures=failures[:50], subcommands=sorted(g)), f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
