#!/usr/bin/env bash
# DESCRIPTION: cryptsetup's own test scripts in the guest (the guest half of make cryptsetup-tests)
#
# cryptsetup-upstream.sh TARBALL [--subset] TEST...: cryptsetup's own test scripts
# (Debian's cryptsetup source, tests/; packed by qemu/lib/cryptsetup-src) against
# the guest's cryptsetup and whichever target serves `crypt` in this boot
# (qemu/cryptsetup-tests boots once with stock, once with ours). Each TEST runs in
# a fresh copy of the tests directory, as root, with CRYPTSETUP_PATH=/sbin, under
# its own time limit, and prints one line
#   CSTEST <test> <PASS|FAIL|SKIP|TIMEOUT> rc=<exit> skipped=<n> na=<n> secs=<s>
# (skipped, na: the "[SKIPPED]" and "[N/A]" marks in its output: what a refused
# table looks like to it; exit 77 is the whole test skipped) and, unless it
# passed, the last lines of its output; when it passed, its lines that say it
# skipped or missed something (compat-test exits 0 without expect, for one).
# --subset: tcrypt-compat-test gets the TrueCrypt images only (the VeraCrypt
# ones take minutes each to derive their keys under emulation; tcw lives in the
# TrueCrypt CBC images), and bitlk-compat-test the AES-CBC images only (eboiv
# and elephant, 512 and 4096 bytes; each BitLocker image costs a million
# SHA-256 rounds to open).
# This script does not judge stock against ours; the host does.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

[ $# -ge 2 ] || fail "usage: cryptsetup-upstream.sh TARBALL [--subset] TEST..."
tarball=$1
shift
subset=0
[ "$1" != --subset ] || { subset=1; shift; }
[ -f "$tarball" ] || fail "the tests tarball $tarball is missing"
limit=${LBS_CSTEST_LIMIT:-900}

# What the scripts expect of a full system: /dev/fd and friends, loop devices.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || ln -s /proc/self/fd/2 /dev/stderr
modprobe loop max_loop=16 2>/dev/null || true
# sd_mod: a disk for the scsi_debug host compat-test loads (no udev here to load it)
for m in dm-integrity dm-verity sd_mod; do modprobe "$m" 2>/dev/null || true; done
# scsi_debug from the host where the kernel lacks it, for compat-test's modprobe
bash "$(dirname "$0")/../common/scsi-debug-module.sh"
printf 'cryptsetup-upstream: %s; crypt is %s; tests from %s\n' \
	"$(cryptsetup --version)" "$(target_version crypt)" "${tarball##*/}"

work=/tmp/cstests
for t in "$@"; do
	rm -rf "$work" && mkdir -p "$work"
	tar -xf "$tarball" -C "$work" --warning=no-timestamp	# in case the guest clock is behind the tarball
	dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	[ -x "$dir/$t" ] || { printf 'CSTEST %s FAIL rc=127 skipped=0 na=0 secs=0\n' "$t"; continue; }
	if [ "$subset" = 1 ]; then
		case $t in
		tcrypt-compat-test)	# it uses the images already unpacked
			(cd "$dir" && tar -xJf tcrypt-images.tar.xz --no-same-owner &&
				rm -f tcrypt-images/vc* tcrypt-images/sys_vc*) ;;
		bitlk-compat-test)	# it insists on unpacking them itself: repack, sparse as they were
			(cd "$dir" && tar -xJf bitlk-images.tar.xz --no-same-owner &&
				rm -f bitlk-images/*-xts-* && tar -cSJf bitlk-images.tar.xz bitlk-images &&
				rm -rf bitlk-images) ;;
		esac
	fi
	start=$(date +%s)
	rc=0
	(cd "$dir" && CRYPTSETUP_PATH=/sbin timeout -k 10 "$limit" bash "./$t") >"$work.out" 2>&1 || rc=$?
	secs=$(($(date +%s) - start))
	skipped=$(grep -c '\[SKIPPED\]' "$work.out" || true)
	na=$(grep -c '\[N/A\]' "$work.out" || true)
	case $rc in
	0) verdict=PASS ;;
	77) verdict=SKIP ;;
	124 | 137) verdict=TIMEOUT ;;
	*) verdict=FAIL ;;
	esac
	printf 'CSTEST %s %s rc=%s skipped=%s na=%s secs=%s\n' "$t" "$verdict" "$rc" "$skipped" "$na" "$secs"
	if [ "$verdict" != PASS ]; then
		tail -n 25 "$work.out" | awk '{ print "   | " $0 }'	# awk ends every line
	else	# what a pass left out: some scripts skip a part and still exit 0
		grep -iE 'skipped|warning|not available|missing' "$work.out" | head -n 10 |
			awk '{ print "   | " $0 }' || true
	fi
	dmsetup remove_all 2>/dev/null || true
	losetup -D 2>/dev/null || true
done
rm -rf "$work" "$work.out"
