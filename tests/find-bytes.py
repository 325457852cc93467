#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""find-bytes.py NEEDLE PATH...: the files under each PATH (a file, or a
directory walked whole; links not followed) that hold the bytes of the file
NEEDLE anywhere, one path a line, and then "found N of M files". Exit 0 when it
could read them all, 2 when NEEDLE is empty or shorter than 16 bytes (too short
to mean anything) or a PATH cannot be read.

The boot checks (tests/initramfs-check, tests/systemd-check) search with it for
a clear key in what must not hold it: an initramfs's decompressed segments,
disk images, a TPM's state. A file is read in blocks that overlap by the
needle's length less one, so a match across two blocks is found.
"""
import os
import sys

BLOCK = 1 << 22


def holds(path, needle):
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK)
            if not block:
                return False
            data = tail + block
            if needle in data:
                return True
            tail = data[-(len(needle) - 1):]


def files(path):
    if os.path.islink(path):
        return
    if os.path.isdir(path):
        for top, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                full = os.path.join(top, name)
                if os.path.isfile(full) and not os.path.islink(full):
                    yield full
    elif os.path.isfile(path):
        yield path


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n")[0], file=sys.stderr)
        return 2
    with open(sys.argv[1], "rb") as f:
        needle = f.read()
    if len(needle) < 16:
        print("find-bytes.py: %s holds %d bytes: too few to search for" % (sys.argv[1], len(needle)),
              file=sys.stderr)
        return 2
    found = seen = 0
    for top in sys.argv[2:]:
        if not os.path.exists(top):
            print("find-bytes.py: no %s" % top, file=sys.stderr)
            return 2
        for path in files(top):
            seen += 1
            if holds(path, needle):
                found += 1
                print(path)
    print("found %d of %d files" % (found, seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
