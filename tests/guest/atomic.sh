#!/usr/bin/env bash
# DESCRIPTION: atomic writes through stock and ours
# BOOT: both
# KERNELS: arm64-64k amd64-4k arm64-64k-7.3
#   where the kernel has scsi_debug or the host builds it
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: scsi_debug
# ORDER: 180
#
# atomic.sh: atomic writes through the target, stock beside
# ours in one boot. Needs stock as crypt and ours as crypt_lbs (`--module both`),
# scsi_debug (atomic_wr=1) and /lbs/bin/atomic_pwrite (tests/guest/bin). Where dm
# core has no atomic writes (before 6.14) both mappings must announce none, and
# an atomic write through either is refused; where it has them:
# - both mappings announce atomic writes; ours a unit no larger than 1 MiB (one
#   bounce bio);
# - an atomic write of the largest unit both and the disk announce succeeds through each, is
#   read back through the other, and leaves the same bytes on the disk (above
#   the 128 KiB request cap, so it went down unsplit);
# - an atomic write one unit larger than announced is refused (EINVAL).
# atomic_pwrite is built static for the guest by qemu/lib/guest-bin.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

prog=/lbs/bin/atomic_pwrite
key=$(test_key 64)
[ -x "$prog" ] || fail "no $prog (qemu/lib/guest-bin builds tests/guest/bin)"
unload_sd() {
	[ ! -d /sys/module/scsi_debug ] || rmmod scsi_debug
}
on_exit unload_sd
on_exit dm_remove lbs-as
on_exit dm_remove lbs-ao

# 1 MiB atomic units on 512-byte blocks: above the request caps
if ! out=$(modprobe scsi_debug atomic_wr=1 dev_size_mb=32 atomic_wr_max_length=2048 \
	atomic_wr_max_length_bndry=2048 atomic_wr_max_bndry=2048 2>&1); then
	fail "modprobe scsi_debug atomic_wr=1 failed: $out (the rig's kernels need CONFIG_SCSI_DEBUG=m)"
fi
modprobe sd_mod 2>/dev/null || true	# built in, or a module scsi_debug does not pull in
scsi_debug_disk
disk=$SD_DISK
dev=/dev/$disk
len=$(blockdev --getsz "$dev")
q=/sys/block/$disk/queue
# unit DEV: the largest atomic write DEV announces (0: none)
unit() {
	local d
	d=$(readlink -f "$1")
	cat "/sys/block/${d#/dev/}/queue/atomic_write_unit_max_bytes" 2>/dev/null || echo 0
}
disk_unit=$(unit "$dev")
[ "$disk_unit" -gt 0 ] || fail "scsi_debug atomic_wr=1: $dev announces no atomic writes ($(cat "$q/atomic_write_max_bytes" 2>/dev/null))"

dmsetup create lbs-ao --table "0 $len crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 sector_size:4096" ||
	fail "ours refused a table over $dev: $(ti_error)"
dmsetup create lbs-as --table "0 $len crypt aes-xts-plain64 $key 0 $dev 0 1 sector_size:4096" ||
	fail "stock refused a table over $dev: $(ti_error)"
ours=$(dm_blkdev lbs-ao) stock=$(dm_blkdev lbs-as)
u_ours=$(unit "$ours") u_stock=$(unit "$stock")

if [ "$u_stock" = 0 ]; then
	[ "$u_ours" = 0 ] || fail "ours announces atomic writes of $u_ours bytes where stock (dm core of $(uname -r)) has none"
	for m in "$ours" "$stock"; do
		if "$prog" "$m" 0 4096 0x5a >/dev/null; then
			fail "an atomic write through $m succeeded where the mapping announces none"
		fi
	done
	ok "dm core of $(uname -r) has no atomic writes: neither mapping announces any, both refuse one (disk: $disk_unit bytes)"
	exit 0
fi
[ "$u_ours" -gt 0 ] || fail "stock announces atomic writes of $u_stock bytes, ours none"
[ "$u_ours" -le $((1 << 20)) ] || fail "ours announces $u_ours bytes, more than one bounce bio (1 MiB)"
# the write: the largest unit the disk and both mappings announce (dm core may
# announce more than the disk's sysfs unit: seen on amd64 7.2, stock alike)
u=$((u_ours < u_stock ? u_ours : u_stock))
[ "$u" -le "$disk_unit" ] || u=$disk_unit

# write BYTE through MAP, read back through OTHER; print the disk's sha256
through() {
	local map=$1 other=$2 byte=$3 want got
	"$prog" "$map" 0 "$u" "$byte" || fail "an atomic write of $u bytes through $map was refused"
	want=$(head -c "$u" /dev/zero | tr '\0' "\\$(printf '%03o' "$byte")" | sha256sum | cut -d' ' -f1)
	got=$(sha_of "$other" "$u" 4096)
	[ "$got" = "$want" ] || fail "$u bytes written atomically through $map read back through $other as $got"
	sha_of "$dev" "$u" 4096
}
raw_ours=$(through "$ours" "$stock" 90)
raw_stock=$(through "$stock" "$ours" 90)
[ "$raw_ours" = "$raw_stock" ] || fail "an atomic write leaves other bytes on the disk through ours than through stock"
ok "atomic writes of $u bytes (ours announces $u_ours, stock $u_stock, the disk $disk_unit): through each, read back through the other, same bytes on the disk"
for m in "$ours" "$stock"; do
	big=$(( $(unit "$m") * 2 ))
	if "$prog" "$m" 0 "$big" 0x33 >/dev/null; then
		fail "an atomic write of $big bytes through $m succeeded; it announces $(unit "$m")"
	fi
done
ok "an atomic write twice the announced unit is refused through both"
