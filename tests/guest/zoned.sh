#!/usr/bin/env bash
# DESCRIPTION: host-managed zoned devices through stock and ours
# BOOT: both
# KERNELS: arm64-4k-6.1 amd64-4k arm64-64k-7.3
#   6.1's zone code, 6.12's on amd64-4k, 7.3's with 64K pages (sector sizes
#   up to 65536): arm64-64k's lane, the longest, runs the same 6.12 as amd64-4k
# FULL-KERNELS: all
# LIMIT: 300 ~60 s; stock's inline waits for the engine, ~60 s more
# NEEDS: null_blk engine
# ORDER: 70
#
# zoned.sh: host-managed zoned devices, stock beside ours in
# one boot. Needs stock as crypt and ours as crypt_lbs (`--module both`) and the
# kernel's null_blk module with zone support (CONFIG_BLK_DEV_NULL_BLK,
# CONFIG_BLK_DEV_ZONED). Over a zoned, memory-backed null_blk (4 MiB zones, no
# conventional zone), for each sector size (4096, and ours alone at the page
# size where it is larger):
# - both targets load a table over it (dm core takes only targets that declare
#   host-managed zones), and dmsetup table prints the same line for both;
# - the mapping reports the device's zones (blkzone report: the same count),
#   and blkzone reset through either mapping resets them (a write from a zone's
#   start then succeeds);
# - 8 MiB written sequentially (two zones) reads back through the target that
#   wrote it and through the other one, and the bytes on the device are the
#   same from both (stock's ciphertext);
# - fio writes 4 zones sequentially at queue depth 8 (zonemode=zbd) and verifies
#   with crc32c: no error, no write-pointer error in the kernel log;
# - one 4 MiB O_DIRECT write from transparent huge pages (a bio of a few
#   bio_vecs that 6.1's dm core passes on whole) is written and reads back
#   through ours (where the kernel has 2 MiB huge pages: not the 64K kernels);
# - the same at 4096 with an asynchronous cipher (the engine, /lbs/kmod/
#   lbs-engine.ko), where each write's requests must end before the next write
#   goes down.
# The huge-page write is skipped (LBS-SKIP) where the kernel has no 2 MiB huge
# pages.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

key=$(test_key 64)
bytes=$((8 << 20))
unload_nullb() {
	[ ! -d /sys/module/null_blk ] || rmmod null_blk
}
on_exit unload_nullb
on_exit dm_remove lbs-zs
on_exit dm_remove lbs-zo

if ! out=$(modprobe null_blk nr_devices=1 zoned=1 zone_size=4 zone_nr_conv=0 gb=1 memory_backed=1 bs=4096 2>&1); then
	fail "modprobe null_blk zoned=1 failed: $out $(dmesg | tail -n 2 | tr '\n' ' ') (the rig's kernels need CONFIG_BLK_DEV_NULL_BLK=m and CONFIG_BLK_DEV_ZONED)"
fi
dev=/dev/nullb0
for _ in $(seq 50); do [ -b "$dev" ] && break; sleep 0.1; done
[ -b "$dev" ] || fail "null_blk made no $dev"
[ "$(cat /sys/block/nullb0/queue/zoned)" = host-managed ] ||
	fail "$dev is not host-managed: $(cat /sys/block/nullb0/queue/zoned)"
len=$(blockdev --getsz "$dev")
zones=$(blkzone report "$dev" | wc -l)
pattern "$bytes" >/tmp/zoned.plain
want=$(sha256sum </tmp/zoned.plain | cut -d' ' -f1)

# mk NAME TARGET SS [CIPHER]: a mapping of the whole device
mk() {
	dmsetup create "$1" --table "0 $len $2 ${4:-aes-xts-plain64} $key 0 $dev 0 1 sector_size:$3" ||
		fail "$2 refused a table over the zoned $dev at sector_size $3: $(ti_error)"
}
# zbd_fio TARGET SS [CIPHER [MIB]]: fio's zoned sequential writes (16 MiB), verified,
# no zone error
zbd_fio() {
	local map bs mib=${4:-16}
	blkzone reset "$dev"
	dmesg -c >/dev/null
	mk lbs-zo "$1" "$2" "${3:-}"
	map=$(dm_blkdev lbs-zo)
	bs=$(($(io_bs "$map") > 65536 ? $(io_bs "$map") : 65536))
	if ! fio_ok /tmp/zoned.fio --name=z --filename="$map" --zonemode=zbd --rw=write \
		--bs="$bs" --direct=1 --ioengine=libaio --iodepth=8 --size="${mib}m" \
		--verify=crc32c --verify_fatal=1; then
		tail -n 20 /tmp/zoned.fio
		fail "$1 at $2 ${3:-}: fio zonemode=zbd at iodepth 8 failed"
	fi
	if dmesg | grep -qiE 'unaligned write|write pointer|zone.*error|I/O error'; then
		fail "$1 at $2 ${3:-}: the kernel logged zone errors under fio: $(dmesg | grep -iE 'unaligned|pointer|zone|I/O error' | head -n 3 | tr '\n' ' ')"
	fi
	dm_remove lbs-zo
	ok "$1 at $2${3:+ $3}: fio zonemode=zbd, $mib MiB sequential at iodepth 8, verified, no zone error logged"
}
# write_through NAME: the pattern, sequentially from the first zone, O_DIRECT
write_through() {
	local map bs
	map=$(dm_blkdev "$1")
	bs=$(io_bs "$map")
	dd if=/tmp/zoned.plain of="$map" bs="$bs" oflag=direct status=none ||
		fail "$1: sequential write of the first $((bytes >> 20)) MiB failed: $(dmesg | tail -n 3 | tr '\n' ' ')"
}
# check_read NAME WHAT
check_read() {
	local got
	got=$(sha_of "$(dm_blkdev "$1")" "$bytes")
	[ "$got" = "$want" ] || fail "$2: reads back as sha256 $got, not the pattern's $want"
}
# raw: sha256 of the first bytes on the device itself
raw() {
	sha_of "$dev" "$bytes"
}

for ss in $(printf '4096\n%s\n' "$(bound)" | sort -un); do
	blkzone reset "$dev"
	stock=no
	[ "$ss" -gt 4096 ] || stock=yes
	mk lbs-zo crypt_lbs "$ss"
	zo=$(blkzone report "$(dm_blkdev lbs-zo)" | wc -l)
	[ "$zo" = "$zones" ] || fail "ours at $ss reports $zo zones; the device has $zones"
	write_through lbs-zo
	check_read lbs-zo "ours at $ss, written by ours"
	raw_ours=$(raw)
	if [ "$stock" = yes ]; then
		mk lbs-zs crypt "$ss"
		# --showkeys: dmsetup itself masks the key of a target named crypt only
		t_ours=$(dmsetup table --showkeys lbs-zo | cut -d' ' -f4-)
		t_stock=$(dmsetup table --showkeys lbs-zs | cut -d' ' -f4-)
		[ "$t_ours" = "$t_stock" ] || fail "dmsetup table over a zoned device: ours '$t_ours', stock '$t_stock'"
		check_read lbs-zs "stock at $ss, written by ours"
		dm_remove lbs-zo
		# the zones reset through the mapping (the device is held by it)
		blkzone reset "$(dm_blkdev lbs-zs)" || fail "blkzone reset through stock's mapping failed"
		write_through lbs-zs
		[ "$(raw)" = "$raw_ours" ] || fail "at $ss the bytes on the device differ between stock and ours"
		mk lbs-zo crypt_lbs "$ss"
		check_read lbs-zo "ours at $ss, written by stock"
		dm_remove lbs-zs
		# a write from the zone's start needs its write pointer back at 0
		blkzone reset "$(dm_blkdev lbs-zo)" || fail "blkzone reset through ours failed"
		write_through lbs-zo
		check_read lbs-zo "ours at $ss, after a zone reset through ours"
		ok "zoned $dev at $ss: both load (table '${t_ours/$key/<key>}'), $zones zones reported, 8 MiB round-trip and cross-read, same bytes on the device"
	else
		ok "zoned $dev at $ss (ours alone: above stock's bound): $zones zones reported, 8 MiB written sequentially reads back"
	fi
	dm_remove lbs-zo

	targets=(crypt_lbs)
	[ "$stock" = no ] || targets+=(crypt)
	for t in "${targets[@]}"; do
		zbd_fio "$t" "$ss"
	done
done

# A zoned write of 4 MiB from transparent huge pages: one bio of a few
# bio_vecs, which dm core of 6.1 (no zone write plugging) hands the target
# whole; the target must cut it to what it can bounce (256 pages at most in one
# bio) instead of asking the bvec allocator for more. Where the kernel has no
# huge pages of at most 4 MiB (the rig's 64K kernels) the bio cannot be built.
huge_zoned_write() {
	local thp=/sys/kernel/mm/transparent_hugepage hp out map got
	hp=$(cat "$thp/hpage_pmd_size" 2>/dev/null || echo 0)
	if [ "$hp" -eq 0 ] || [ "$hp" -gt $((4 << 20)) ]; then
		echo "LBS-SKIP zoned: a 4 MiB write from huge pages: this kernel's huge page is ${hp} bytes (none, or above 4 MiB); the case needs 2 MiB ones (arm64-4k-6.1, amd64-4k run it)"
		return 0
	fi
	echo madvise >"$thp/enabled" || fail "cannot set $thp/enabled to madvise"
	echo 1 >/proc/sys/vm/compact_memory
	blkzone reset "$dev"
	dmesg -c >/dev/null
	mk lbs-zo crypt_lbs 4096
	map=$(dm_blkdev lbs-zo)
	head -c $((4 << 20)) /tmp/zoned.plain >/tmp/zoned.4m
	if ! out=$(/lbs/bin/huge_pwrite "$map" 0 $((4 << 20)) /tmp/zoned.4m 2>&1); then
		fail "ours at 4096: one 4 MiB O_DIRECT write from huge pages to the zoned mapping failed: $out $(dmesg | tail -n 3 | tr '\n' ' ')"
	fi
	got=$(sha_of "$map" $((4 << 20)))
	[ "$got" = "$(sha256sum </tmp/zoned.4m | cut -d' ' -f1)" ] ||
		fail "ours at 4096: the 4 MiB written from huge pages reads back as sha256 $got"
	dm_remove lbs-zo
	ok "ours at 4096: one 4 MiB O_DIRECT write from huge pages ($(sed -n 's/.*, \([0-9]* kB\) of it.*/\1/p' <<<"$out") of huge pages) to the zoned mapping, written and read back"
}
huge_zoned_write

# an asynchronous cipher: the engine, fast
load_engine latency_us=200
for t in crypt_lbs crypt; do
	zbd_fio "$t" 4096 capi:lbs-engine-xts-aes-plain64 8
done
