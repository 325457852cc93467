#!/usr/bin/env bash
# DESCRIPTION: ext4 with blocks of the page size survives unmount, reload and e2fsck
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
# ORDER: 100
#
# ext4.sh: a file system on dm-crypt-lbs.
# Needs ours as crypt_lbs (`--module both`). ext4 with block size = page size (ext4
# allows up to PAGE_SIZE) on a mapping whose sector size is the largest this
# kernel allows, and on one of 4096 (and 512 on 4K kernels): files written,
# unmounted, the mapping removed and loaded again, mounted again: the checksums
# are equal and e2fsck finds nothing.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
len=$((32 << 11))	# 32 MiB
key=$(test_key 64)
mnt=/mnt/lbs-ext4
mkdir -p "$mnt"
on_exit dm_remove lbs-ext4
on_exit umount "$mnt"
modprobe ext4 2>/dev/null || true
page=$(page_size)
bs=$page
[ "$bs" -le 65536 ] || bs=65536
files=/tmp/ext4.files
mkdir -p "$files"
head -c $((1 << 20)) /dev/urandom >"$files/random"
pattern $((1 << 20)) >"$files/pattern"
printf 'abc' >"$files/small"

map() {	# map SS
	dmsetup create lbs-ext4 --table "0 $len crypt_lbs aes-xts-plain64 $key 0 $dev 0 2 sector_size:$1 iv_large_sectors" ||
		fail "ss=$1: refused: $(ti_error)"
}

sums() {	# sums DIR: the checksums of the test files under DIR
	(cd "$1" && sha256sum random pattern small sub/deep/random)
}

sizes=("$(bound)")
[ "$(bound)" = 4096 ] || sizes+=(4096)
[ "$page" != 4096 ] || sizes+=(512)
for ss in "${sizes[@]}"; do
	what="ext4 -b $bs on ss=$ss"
	dd if=/dev/zero of="$dev" bs=1M count=32 oflag=direct status=none
	map "$ss"
	mkfs.ext4 -q -F -b "$bs" -E nodiscard "$(dm_blkdev lbs-ext4)" >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; fail "$what: mkfs failed"; }
	mount -t ext4 "$(dm_blkdev lbs-ext4)" "$mnt" || fail "$what: mount failed: $(dmesg | tail -n 3)"
	got_bs=$(stat -f -c %S "$mnt")
	[ "$got_bs" = "$bs" ] || fail "$what: the mounted file system has block size $got_bs"
	cp "$files"/random "$files"/pattern "$files"/small "$mnt/"
	mkdir -p "$mnt/sub/deep"
	cp "$files/random" "$mnt/sub/deep/random"
	before=$(sums "$mnt")
	[ "$before" = "$(mkdir -p "$files/sub/deep" && cp "$files/random" "$files/sub/deep/" && sums "$files")" ] ||
		fail "$what: the files differ right after writing"
	umount "$mnt"
	dm_remove lbs-ext4
	map "$ss"
	e2fsck -fn "$(dm_blkdev lbs-ext4)" >/tmp/fsck.log 2>&1 || { cat /tmp/fsck.log; fail "$what: e2fsck found problems"; }
	mount -t ext4 "$(dm_blkdev lbs-ext4)" "$mnt" || fail "$what: remount failed"
	after=$(sums "$mnt")
	[ "$before" = "$after" ] || fail "$what: checksums differ after remount: $before / $after"
	umount "$mnt"
	dm_remove lbs-ext4
	ok "$what: 4 files, unmount, reload, e2fsck clean, remount, checksums equal"
done
