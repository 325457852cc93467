#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""initramfs-boot.py: boot a kernel and an initramfs under qemu and talk to its
console as a person at the machine would (tests/initramfs-check).

    tests/initramfs-boot.py --qemu Q --kernel K --initrd I --append A --disk IMG...
        --answer PROMPT TEXT... --expect LINE... [--hotplug TEXT IMG...] --timeout S --log FILE
        [--tpm SOCKET]

Each --answer types TEXT and a return when PROMPT appears on the console (once
each, in order: the same PROMPT twice is answered at its first and its second
appearance); each --hotplug adds IMG as a virtio disk (qemu's QMP: blockdev-add,
device_add on the PCI bus, which the guest's ACPI hot-plug finds) once TEXT
appears on the console: a disk that comes late, as a slow or assembled one does.
The run passes when every --expect line has appeared, in order,
before the guest powers off. Answers and expected lines are each in order,
followed apart (a line expected between two prompts is found however the
console's output was split). --tpm SOCKET gives the guest a TPM 2.0 (tpm-tis)
on the swtpm whose control channel is SOCKET (qemu/lib/swtpm.sh, swtpm_start:
the caller starts and stops it). Prints what it saw and why it failed; exit 0
on success, 1 otherwise.
"""
import argparse
import os
import select
import subprocess
import sys
import time


def hotplug(path, image, n):
    """Adds IMAGE as virtio disk number N through the QMP socket PATH; returns
    None, or what went wrong."""
    import json
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(path)
        stream = sock.makefile("rwb")

        def reply():
            while True:
                line = stream.readline()
                if not line:
                    return {"error": {"desc": "QMP closed the connection"}}
                msg = json.loads(line)
                if "return" in msg or "error" in msg:
                    return msg

        stream.readline()   # the greeting
        for command in ({"execute": "qmp_capabilities"},
                        {"execute": "blockdev-add", "arguments": {
                            "driver": "raw", "node-name": "hotplug%d" % n,
                            "file": {"driver": "file", "filename": image}}},
                        {"execute": "device_add", "arguments": {
                            "driver": "virtio-blk-pci", "id": "hotdisk%d" % n,
                            "drive": "hotplug%d" % n}}):
            stream.write(json.dumps(command).encode() + b"\n")
            stream.flush()
            msg = reply()
            if "error" in msg:
                return "%s: %s" % (command["execute"], msg["error"].get("desc"))
        return None
    except (OSError, ValueError) as e:
        return str(e)
    finally:
        sock.close()


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
    ap.add_argument("--hotplug", action="append", nargs=2, default=[])
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tpm")
    a = ap.parse_args()
    # Emulated with one TCG thread, as qemu/run boots the rig's amd64 guests (it says why:
    # KVM guests hung under nested virtualisation).
    cmd = [a.qemu, "-M", "pc", "-cpu", "max", "-accel", "tcg,thread=single", "-m", "1024",
           "-smp", "1", "-display", "none", "-monitor", "none", "-serial", "stdio",
           "-no-reboot", "-kernel", a.kernel, "-initrd", a.initrd,
           # as qemu/run: no IO-APIC timer test, which a loaded host's emulated PIT fails
           "-append", a.append + " no_timer_check"]
    for disk in a.disk:
        cmd += ["-drive", "file=%s,format=raw,if=virtio" % disk]
    qmp_path = a.log + ".qmp"
    if a.hotplug:
        if os.path.exists(qmp_path):
            os.unlink(qmp_path)
        cmd += ["-qmp", "unix:%s,server=on,wait=off" % qmp_path]
    hotplugs = [list(x) for x in a.hotplug]
    if a.tpm:
        cmd += ["-chardev", "socket,id=chrtpm,path=%s" % a.tpm,
                "-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0"]
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
            while hotplugs and hotplugs[0][0].encode() in seen:
                text, image = hotplugs.pop(0)
                err = hotplug(qmp_path, image, len(a.hotplug) - len(hotplugs))
                if err:
                    p.kill()
                    print("initramfs-boot: FAIL: could not add %s: %s" % (image, err))
                    return 1
                print("initramfs-boot: added the disk %s after %r, after %.0f s"
                      % (image, text, time.time() - start))
            while expects and expects[0].encode() in seen[emark:]:
                emark = seen.index(expects[0].encode(), emark) + len(expects[0])
                print("initramfs-boot: saw %r after %.0f s" % (expects.pop(0),
                                                               time.time() - start))
    missing = [p for p, _ in answers] + [t for t, _ in hotplugs] + expects
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
