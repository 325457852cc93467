#!/usr/bin/env python3
"""Print the rig's private apt source list (deb822) made from the machine's own
Debian 12 sources, in either format, without changing them:

  /etc/apt/sources.list and sources.list.d/*.list  one-line entries
  /etc/apt/sources.list.d/*.sources                deb822 stanzas

Only the bookworm suites are kept (other suites, third-party repositories and
disabled entries are left out). Each entry gets both `deb` and `deb-src`, so
one private configuration serves the guests' binary packages, the build
machine's kbuild tools and fio's source. The security suite is added on
deb.debian.org when the machine has none: the pinned kernels live there.

Debian's unstable suite is added for the packages of NEWER alone: the sources of
the Linux 7.x kernels the rig builds (bookworm has no 7.x) or compile-tests
(the newest of any suite), and the source of
sparse (bookworm's 0.6.4 is too old for 7.x's checker-valid.sh; unstable's
binary needs a newer glibc, so qemu/lib/sparse builds it). Debian's experimental
suite (the next kernel's release candidates) and trixie-backports (the released
7.x kernels Debian 13 users install, linux-source-7.3 7.3.N-1~bpo13+1 among
them) are added the same way; where two suites carry one package, the higher
version wins under the same pin. Each comes from the machine's own entry for
that suite when it has one, else from the entry of the suite before it in
NEWER_SUITES, else from the mirror of its bookworm entry, with that entry's
key; binary packages of the build machine's architecture only.
`--preferences` prints the apt pin that keeps everything else from coming from
there: any other package of those suites has priority -1, so no resolution (a
rootfs closure, say) can take it.

Usage: apt-sources.py [ETC_APT_DIR]                 (default /etc/apt)
       apt-sources.py --preferences
"""

import re
import subprocess
import sys
from pathlib import Path

SUITE = re.compile(r"^bookworm(-updates|-security|-backports)?$")
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# What the rig takes from the suites of NEWER_SUITES: the kernel sources of every
# series (an apt glob), so that the newest kernel Debian carries anywhere can be
# built (tests/newest-kernel-check); nothing else (see --preferences).
NEWER = ["linux-source-*"]
NEWER_SUITES = {"unstable": ("unstable", "sid"), "experimental": ("experimental", "rc-buggy"),
                "trixie-backports": ("trixie-backports",)}
# How the pin names each suite's Release: by archive (a=) where that name is
# the suite's own, by codename (n=) for trixie-backports, whose archive name is
# stable-backports (oldstable-backports once Debian 14 is out).
PIN_FIELD = {"trixie-backports": "n"}


def one_line(path):
    """Entries of a one-line sources file: (uri, suite, components, signed_by)."""
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] not in ("deb", "deb-src"):
            continue
        words = words[1:]
        options = {}
        if words and words[0].startswith("["):
            opts = []
            while words:
                word = words.pop(0)
                opts.append(word)
                if word.endswith("]"):
                    break
            for opt in " ".join(opts).strip("[] ").split():
                key, _, value = opt.partition("=")
                options[key.lower()] = value
        if len(words) < 3:
            continue
        yield words[0], words[1], words[2:], options.get("signed-by")


def deb822(path):
    """Entries of a deb822 .sources file, one per (URI, suite)."""
    for stanza in re.split(r"\n\s*\n", path.read_text()):
        fields = {}
        key = None
        for raw in stanza.splitlines():
            if raw.startswith("#"):
                continue
            if raw[:1] in (" ", "\t") and key:
                fields[key] += "\n" + raw.strip()
                continue
            key, sep, value = raw.partition(":")
            if not sep:
                key = None
                continue
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by")
        if signed_by and "\n" in signed_by:
            signed_by = None  # an inline key block; apt's trusted keys serve instead
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                yield uri, suite, fields.get("components", "").split(), signed_by


def entries(etc):
    found = []
    files = [etc / "sources.list"] + sorted((etc / "sources.list.d").glob("*.list"))
    for path in files:
        if path.is_file():
            found += one_line(path)
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        found += deb822(path)
    return found


def host_arch():
    """The build machine's architecture: NEWER are arch:all, and every index
    lists them, so those suites' lists are fetched for one architecture only."""
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


def preferences():
    """The pin of the private configuration: NEWER from the suites of
    NEWER_SUITES, nothing else. A package's own pin wins over the catch-all one, whatever their
    order; among equal priorities apt takes the higher version."""
    first = True
    for suite in NEWER_SUITES:
        if not first:
            print()
        first = False
        field = PIN_FIELD.get(suite, "a")
        print("Package: *")
        print(f"Pin: release {field}={suite}")
        print("Pin-Priority: -1")
        for name in NEWER:
            print()
            print(f"Package: {name}")
            print(f"Pin: release {field}={suite}")
            print("Pin-Priority: 500")
    return 0


def main(argv):
    if argv[1:] == ["--preferences"]:
        return preferences()
    etc = Path(argv[1]) if len(argv) > 1 else Path("/etc/apt")
    seen = set()
    kept = []
    newer = {}
    for uri, suite, components, signed_by in entries(etc):
        for name, aliases in NEWER_SUITES.items():
            if suite in aliases and "main" in components and name not in newer:
                newer[name] = (uri, signed_by)
        if not SUITE.match(suite) or "main" not in components:
            continue
        key = (uri.rstrip("/"), suite)
        if key in seen:
            continue
        seen.add(key)
        kept.append((uri, suite, signed_by))
    suites = {suite for _, suite, _ in kept}
    if "bookworm" not in suites:
        print(f"apt-sources: no Debian 12 (bookworm) entry with 'main' in {etc}/sources.list "
              f"or {etc}/sources.list.d/: the rig downloads Debian 12 packages", file=sys.stderr)
        return 1
    if "bookworm-security" not in suites:
        kept.append(("http://deb.debian.org/debian-security", "bookworm-security", DEBIAN_KEYRING))
    for uri, suite, signed_by in kept:
        print("Types: deb deb-src")
        print(f"URIs: {uri}")
        print(f"Suites: {suite}")
        print("Components: main")
        if signed_by:
            print(f"Signed-By: {signed_by}")
        print()
    # the suites of NEWER_SUITES: where the machine has them, else on the mirror
    # bookworm comes from, with that entry's key; binary packages of one
    # architecture only, and sources (every source fetch names its version:
    # qemu/lib/sparse, fio, ...)
    fallback = next((u, s) for u, suite, s in kept if suite == "bookworm")
    for name in NEWER_SUITES:
        # experimental, where the machine has none, from its unstable's mirror
        uri, signed_by = newer.get(name, fallback)
        fallback = newer.get(name, fallback)
        print("Types: deb deb-src")
        print(f"URIs: {uri}")
        print(f"Suites: {name}")
        print(f"Architectures: {host_arch()}")
        print("Components: main")
        if signed_by:
            print(f"Signed-By: {signed_by}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
