#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""initramfs-boot.py: boot a kernel and an initramfs under qemu and talk to its
console as a person at the machine would (tests/initramfs-check).

    tests/initramfs-boot.py --qemu Q --kernel K --initrd I --append A --disk IMG...
        --answer PROMPT TEXT... --expect LINE... --timeout S --log FILE

Each --answer types TEXT and a return when PROMPT appears on the console (once
each, in order: the same PROMPT twice is answered at its first and its second
appearance); the run passes when every --expect line has appeared, in order,
before the guest powers off. Answers and expected lines are each in order,
followed apart (a line expected between two prompts is found however the
console's output was split). Prints what it saw and why it failed;
exit 0 on success, 1 otherwise.
"""
import argparse
import os
import select
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qemu", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--initrd", required=True)
    ap.add_argument("--append", required=True)
    ap.add_argument("--disk", action="append", default=[])
    # two words, PROMPT and TEXT: a prompt may hold '=' (LABEL=...), and so may a passphrase
    ap.add_argument("--answer", action="append", nargs=2, default=[])
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    # Emulated with one TCG thread, as qemu/run boots the rig's amd64 guests (it says why:
    # KVM guests hung under nested virtualisation).
    cmd = [a.qemu, "-M", "pc", "-cpu", "max", "-accel", "tcg,thread=single", "-m", "1024",
           "-smp", "1", "-display", "none", "-monitor", "none", "-serial", "stdio",
           "-no-reboot", "-kernel", a.kernel, "-initrd", a.initrd, "-append", a.append]
    for disk in a.disk:
        cmd += ["-drive", "file=%s,format=raw,if=virtio" % disk]
    answers = [list(x) for x in a.answer]
    expects = list(a.expect)
    seen = b""
    start = time.time()
    with open(a.log, "wb") as log, subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                                   stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT) as p:
        fd = p.stdout.fileno()
        amark = 0       # where the next prompt is looked for
        emark = 0       # where the next expected line is looked for
        while True:
            left = a.timeout - (time.time() - start)
            if left <= 0:
                p.kill()
                why = "timed out after %d s" % a.timeout
                break
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    p.wait()
                    why = "the guest powered off"
                    break
                log.write(chunk)
                log.flush()
                seen += chunk
            while answers and answers[0][0].encode() in seen[amark:]:
                prompt, text = answers.pop(0)
                amark = seen.index(prompt.encode(), amark) + len(prompt)
                time.sleep(0.5)     # the prompt is written before echo is turned off
                p.stdin.write(text.encode() + b"\r")
                p.stdin.flush()
                print("initramfs-boot: typed an answer to %r after %.0f s"
                      % (prompt, time.time() - start))
            while expects and expects[0].encode() in seen[emark:]:
                emark = seen.index(expects[0].encode(), emark) + len(expects[0])
                print("initramfs-boot: saw %r after %.0f s" % (expects.pop(0),
                                                               time.time() - start))
    missing = [p for p, _ in answers] + expects
    if missing:
        print("initramfs-boot: FAIL: %s before %r appeared (log %s); the console's last lines:"
              % (why, missing[0], a.log))
        for line in seen.decode("utf-8", "replace").splitlines()[-15:]:
            print("  | " + line)
        return 1
    if p.returncode not in (0, None):
        print("initramfs-boot: FAIL: qemu exited %d (log %s)" % (p.returncode, a.log))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
