#!/usr/bin/env python3
"""qemu/lib/monitor.py SOCKET COMMAND...: send monitor commands to a running guest.

SOCKET is the QMP socket of qemu/run --monitor SOCKET. Each COMMAND is a line of
qemu's human monitor (HMP: "drive_add 0 if=none,id=d0,file=IMG,format=raw",
"device_add virtio-blk-pci,drive=d0,bus=hp0"), sent in order through QMP's
human-monitor-command, which answers with the text the monitor would print. Each
command and its answer are printed; the exit status is 1 as soon as one fails (a
QMP error, or an answer line starting with "Error" or "unknown command"), 2 when
the socket cannot be reached within --wait seconds (default 10).
"""
import argparse
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path, wait):
        deadline = time.monotonic() + wait
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() >= deadline:
                    raise SystemExit(f"monitor: cannot reach {path}: {e.strerror}") from None
                time.sleep(0.2)
        self.file = self.sock.makefile("rwb")
        greeting = self.read()
        if "QMP" not in greeting:
            raise SystemExit(f"monitor: {path} is not a QMP socket: {greeting}")
        self.execute("qmp_capabilities")

    def read(self):
        line = self.file.readline()
        if not line:
            raise SystemExit("monitor: qemu closed the socket")
        return json.loads(line)

    def execute(self, command, arguments=None):
        """The command's "return", or raise RuntimeError with QMP's error."""
        msg = {"execute": command}
        if arguments is not None:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg).encode() + b"\n")
        self.file.flush()
        while True:
            answer = self.read()
            if "return" in answer:
                return answer["return"]
            if "error" in answer:
                raise RuntimeError(answer["error"].get("desc", str(answer["error"])))
            # anything else is an event (DEVICE_DELETED, ...): not an answer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("socket")
    parser.add_argument("commands", nargs="+", metavar="COMMAND")
    parser.add_argument("--wait", type=float, default=10.0)
    args = parser.parse_args()
    try:
        qmp = Qmp(args.socket, args.wait)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    for command in args.commands:
        print(f"(qemu) {command}")
        try:
            text = qmp.execute("human-monitor-command", {"command-line": command})
        except RuntimeError as e:
            print(f"monitor: '{command}' failed: {e}", file=sys.stderr)
            return 1
        text = text.rstrip("\r\n")
        if text:
            print(text)
        if any(line.startswith(("Error", "unknown command")) for line in text.splitlines()):
            print(f"monitor: '{command}' failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
