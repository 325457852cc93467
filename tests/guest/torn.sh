#!/usr/bin/env bash
# torn.sh: what a torn encryption sector reads back, for every mode family and
# every sector size, stock (crypt, up to 4096) beside ours (crypt_lbs, up to the
# page). Needs `--module both` and /lbs/bin/torn (tests/guest/bin/torn.c), which
# writes old and then new data through the mapping, lays every tear a device
# writing 512 or 4096 bytes atomically may leave on the ramdisk, and reads the
# sector back. Prints a line per tear,
#   TORN <target> <mode> <sector size> <unit> <tear> <what each 16-byte block read>
# which tests/torn/torn_table.py turns into the table of dm-crypt-lbs.rst
# ("Torn writes") and checks against it. The modes: XTS with plain64, CBC with
# essiv, CBC with elephant (BitLocker's diffuser and eboiv), and AES-GCM with
# random IVs over dm-integrity in direct mode ('D', its tags on a metadata device
# of its own, the ramdisk's second half, so the data lies on the first half as
# the mapping sees it; dm-integrity takes block sizes up to 4096). A sector of 512 bytes cannot tear under either
# unit, so the sizes start at 1024.
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

prog=/lbs/bin/torn
[ -x "$prog" ] || fail "no $prog (qemu/lib/guest-bin builds tests/guest/bin)"
modprobe dm-integrity 2>/dev/null || true
on_exit dmsetup remove_all
# the ramdisk's halves: the mapped data, and the AEAD case's tags
half=$(($(blockdev --getsz /dev/ram0) / 2 / 128 * 128))
dmsetup create lbs-tdata --table "0 $half linear /dev/ram0 0"
dmsetup create lbs-tmeta --table "0 $half linear /dev/ram0 $half"
data=/dev/mapper/lbs-tdata meta=/dev/mapper/lbs-tmeta
key32=$(test_key 32)
key64=$(test_key 64)
tears=0

# tear TARGET MODE SS TABLE_CIPHER KEY DEV OPTS...: map DEV (which lays its
# sectors where $data has them), tear its fourth sector under each unit below
# SS, print the TORN lines
tear() {
	local target=$1 mode=$2 ss=$3 cipher=$4 key=$5 dev=$6 unit out n
	shift 6
	local opts=("$@" "sector_size:$ss")
	dmsetup create lbs-torn --table "0 $half $target $cipher $key 0 $dev 0 ${#opts[@]} ${opts[*]}" ||
		fail "$target $mode at $ss: the table was refused: $(ti_error)"
	for unit in 512 4096; do
		[ "$unit" -lt "$ss" ] || continue
		out=$("$prog" /dev/mapper/lbs-torn "$data" $((3 * ss)) "$ss" "$unit" "$ss" 2>&1) ||
			fail "$target $mode at $ss, unit $unit: the tear helper failed: $out"
		n=$(grep -c '^TORN ' <<<"$out")
		[ "$n" -gt 0 ] || fail "$target $mode at $ss, unit $unit: no tear was tried"
		printf '%s\n' "${out//TORN /TORN $target $mode $ss $unit }"
		tears=$((tears + n))
	done
	dmsetup remove lbs-torn
}

for target in crypt crypt_lbs; do
	max=4096
	[ "$target" = crypt ] || max=$(bound)
	for ss in $(sizes_upto "$max"); do
		[ "$ss" -gt 512 ] || continue
		tear "$target" xts-plain64 "$ss" aes-xts-plain64 "$key64" "$data"
		tear "$target" cbc-essiv "$ss" aes-cbc-essiv:sha256 "$key32" "$data"
		tear "$target" cbc-elephant "$ss" aes-cbc-elephant "$key64" "$data"
		[ "$ss" -le 4096 ] || continue
		# dm-integrity in direct mode, its tags (12-byte IV + 16-byte tag) on $meta
		dd if=/dev/zero of="$meta" bs=1M count=8 oflag=direct status=none
		dmsetup create lbs-tint --table "0 $half integrity $data 0 28 D 2 block_size:$ss meta_device:$meta" ||
			fail "dm-integrity (D, block_size $ss, tags on $meta) was refused: $(dmesg | tail -n 3 | tr '\n' ' ')"
		tear "$target" gcm-random "$ss" 'capi:gcm(aes)-random' "$key32" /dev/mapper/lbs-tint integrity:28:aead
		dmsetup remove lbs-tint
	done
	ok "$target: every mode and sector size from 1024 to $max torn under 512- and 4096-byte units"
done
ok "$tears tears read back (TORN lines: tests/torn/torn_table.py)"
