#!/bin/bash
# DESCRIPTION: the first boot of tests/handover-check: volumes written by dm-crypt-lbs
#
# handover-write.sh TOKEN: the first boot of tests/handover-check, on the rig's
# init with dm-crypt-lbs as crypt (qemu/run --module lbscrypt), two virtio disks
# of serials lbsone and lbstwo (found by /sys/block/vdX/serial: there is no udev
# here, and virtio-mmio does not number them in the order given), and the key
# file /lbs/files/ho.key. Opens each with
# `lbscrypt open` at sector size 65536, makes ext4 of 64 KiB blocks on it, writes
# /token ("VOLUME TOKEN") and /data (8 MiB of random bytes), closes it, and prints
#   HANDOVER-SUMS SHA256-OF-ONE'S-DATA,SHA256-OF-TWO'S-DATA
# for the second boot to check. Needs a 64K-page kernel.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

[ $# -eq 1 ] || fail "usage: handover-write.sh TOKEN"
token=$1
key=/lbs/files/ho.key
[ -f "$key" ] || fail "no $key: tests/handover-check passes it with --file"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is '$(target_version crypt)', expected dm-crypt-lbs v1.30.0"
[ -d /sys/module/dm_crypt_lbs ] || fail "dm_crypt_lbs is not loaded: needs qemu/run --module lbscrypt"
[ "$(page_size)" = 65536 ] || fail "the page size is $(page_size): sector size 65536 needs 64K pages"
on_exit umount /mnt
on_exit lbscrypt close lbsone
on_exit lbscrypt close lbstwo
# disk SERIAL: the virtio disk of that serial
disk() {
	local f
	for f in /sys/block/vd*/serial; do
		[ -e "$f" ] || continue
		if [ "$(cat "$f")" = "$1" ]; then
			f=${f%/serial}
			printf '/dev/%s\n' "${f##*/}"
			return 0
		fi
	done
	return 1
}
sums=()
for vol in one two; do
	name=lbs$vol
	disk=$(disk "$name") || fail "no virtio disk of serial $name: tests/handover-check attaches lbsone and lbstwo"
	out=$(lbscrypt open --type plain --cipher aes-xts-plain64 --key-size 512 --key-file "$key" \
		--sector-size 65536 "$disk" "$name" 2>&1) || fail "lbscrypt open $disk $name at 65536: $out"
	table=$(dmsetup table "$name")
	[[ $table == *" crypt aes-xts-plain64 "*" sector_size:65536"* ]] || fail "$name's table is not crypt at 65536: $table"
	ok "lbscrypt open $disk $name: $table"
	out=$(mkfs.ext4 -q -F -b 65536 "/dev/mapper/$name" 2>&1) || fail "mkfs.ext4 -b 65536 on $name: $out"
	mount "/dev/mapper/$name" /mnt || fail "mount /dev/mapper/$name failed"
	printf '%s %s\n' "$vol" "$token" >/mnt/token
	head -c $((8 << 20)) /dev/urandom >/mnt/data
	sum=$(sha256sum </mnt/data | cut -d' ' -f1)
	umount /mnt || fail "umount of $name failed"
	lbscrypt close "$name" || fail "lbscrypt close $name failed"
	ok "$name: ext4 of 64 KiB blocks with /token and 8 MiB of /data (sha256 $sum), closed"
	sums+=("$sum")
done
echo "HANDOVER-SUMS ${sums[0]},${sums[1]}"
