#!/usr/bin/env bash
# DESCRIPTION: crypto failures lose nothing and leak nothing (make harden)
#   qemu/harden runs it on the debug kernel
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: engine
#
# faults.sh: crypto failures lose nothing and leak nothing. For make harden; needs ours as crypt_lbs (`--module both`) and
# the emulated engine (/lbs/kmod/lbs-engine.ko). The engine fails 10% of its
# requests with -EIO while 128 blocks of 4096 bytes (one sector, one request
# each: GNU dd's O_DIRECT) are written and read one at a time. The draws are
# random: with 128 of each, no failed write or no failed read has a chance of
# about 1e-6, so "some of each fail" is a fair demand:
# - a write that fails returns EIO; every write that succeeded reads back right
#   once the faults stop, and the ramdisk never holds plaintext (each block on the
#   ramdisk is the ciphertext of the old or of the new data);
# - a read that fails returns EIO, never other bytes; a read that succeeds returns
#   the data;
# - after the faults stop, the device works: a full write and read back.
# Prints "FAULTS injected=N" for make harden's summary.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

spec=capi:lbs-engine-xts-aes-plain64
key=$(test_key 64)
dev=/dev/ram0
blocks=128	# 4 KiB blocks, one engine request each
bs=4096
on_exit dm_remove lbs-ft
on_exit rm -rf /tmp/ft.parts

load_engine latency_us=50
rate=/sys/module/lbs_engine/parameters/error_rate_ppm
[ -w "$rate" ] || fail "the engine has no writable error_rate_ppm"
stats=/sys/kernel/lbs_engine/stats
# errors: the requests the engine failed on purpose so far
errors() {
	local n
	n=$(awk '$1 == "injected" { print $2 }' "$stats")
	[ -n "$n" ] || fail "no \"injected\" counter in $stats"
	printf '%s\n' "$n"
}

ss=$bs
dmsetup create lbs-ft --table "0 $((blocks * bs / 512)) crypt_lbs $spec $key 0 $dev 0 1 sector_size:$ss" ||
	fail "the engine mapping was refused: $(ti_error)"
map=$(dm_blkdev lbs-ft)

# blocks_of TAG: $blocks blocks of repeated "TAG block NNNNN" lines, one number a block
# blocks_of WORD: $blocks blocks of $bs bytes, block i filled with "WORD block i"
# lines (one process: a process start costs a second on the debug kernel)
blocks_of() {
	awk -v word="$1" -v n="$blocks" -v bs="$bs" 'BEGIN {
		for (i = 0; i < n; i++) {
			line = sprintf("%s block %05d\n", word, i)
			out = ""
			while (length(out) < bs)
				out = out line
			printf "%s", substr(out, 1, bs)
		}
	}'
}
blocks_of OLD >/tmp/ft.old
blocks_of NEW >/tmp/ft.new
[ "$(stat -c %s /tmp/ft.old)" = $((blocks * bs)) ] || fail "blocks_of made $(stat -c %s /tmp/ft.old) bytes, not $((blocks * bs))"
# sums_of FILE...: each file's sha256, in the order given, one per line
sums_of() { sha256sum "$@" | cut -d' ' -f1; }
# the sha256 of every block of the old and the new version
rm -rf /tmp/ft.parts && mkdir -p /tmp/ft.parts
split -b "$bs" -d -a 4 /tmp/ft.old /tmp/ft.parts/old.
split -b "$bs" -d -a 4 /tmp/ft.new /tmp/ft.parts/new.
mapfile -t old_sum < <(sums_of /tmp/ft.parts/old.*)
mapfile -t new_sum < <(sums_of /tmp/ft.parts/new.*)
if [ "${#old_sum[@]}" != "$blocks" ] || [ "${#new_sum[@]}" != "$blocks" ]; then
	fail "split made ${#old_sum[@]} and ${#new_sum[@]} blocks, not $blocks"
fi
put /tmp/ft.old "$map" "$bs"

before=$(errors)
echo 100000 >"$rate"
failed_w=0
: >/tmp/ft.failed
for ((i = 0; i < blocks; i++)); do
	if ! dd if=/tmp/ft.new of="$map" bs="$bs" skip="$i" seek="$i" count=1 oflag=direct status=none 2>/tmp/ft.err; then
		grep -q 'Input/output error' /tmp/ft.err || fail "block $i: a failed write did not say EIO: $(cat /tmp/ft.err)"
		failed_w=$((failed_w + 1))
		printf '%s\n' "$i" >>/tmp/ft.failed
	fi
done
# the ramdisk must not hold the plaintext of either version
if grep -q -a -e 'NEW block' -e 'OLD block' "$dev"; then
	fail "the ramdisk holds plaintext after failed writes"
fi
failed_r=0 wrong_r=0 read_ok=() read_parts=()
rm -f /tmp/ft.parts/got.*
for ((i = 0; i < blocks; i++)); do
	printf -v part '/tmp/ft.parts/got.%04d' "$i"
	if dd if="$map" of="$part" bs="$bs" skip="$i" count=1 iflag=direct status=none 2>/tmp/ft.err; then
		read_ok+=("$i")
		read_parts+=("$part")
	else
		grep -q 'Input/output error' /tmp/ft.err || fail "block $i: a failed read did not say EIO: $(cat /tmp/ft.err)"
		failed_r=$((failed_r + 1))
	fi
done
if [ "${#read_ok[@]}" -gt 0 ]; then
	mapfile -t got_sum < <(sums_of "${read_parts[@]}")
	for j in "${!read_ok[@]}"; do
		i=${read_ok[$j]}
		[ "${got_sum[$j]}" = "${old_sum[$i]}" ] || [ "${got_sum[$j]}" = "${new_sum[$i]}" ] || wrong_r=$((wrong_r + 1))
	done
fi
echo 0 >"$rate"
injected=$(($(errors) - before))
[ "$wrong_r" = 0 ] || fail "$wrong_r reads under faults returned bytes that were never written"
[ "$injected" -gt 0 ] || fail "the engine injected no error"
if [ "$failed_w" = 0 ] || [ "$failed_r" = 0 ] || [ "$failed_w" = "$blocks" ]; then
	fail "10% injected, yet $failed_w of $blocks writes and $failed_r reads failed (some of each must fail, not every write)"
fi
ok "10% of engine requests failed ($injected): $failed_w of $blocks writes and $failed_r reads returned EIO; no read returned other bytes; no plaintext on the ramdisk"

# each block is old or new; a block whose write succeeded is new
rm -f /tmp/ft.parts/got.*
for ((i = 0; i < blocks; i++)); do
	printf -v part '/tmp/ft.parts/got.%04d' "$i"
	dd if="$map" of="$part" bs="$bs" skip="$i" count=1 iflag=direct status=none ||
		fail "block $i: read failed with the faults off"
done
mapfile -t got_sum < <(sums_of /tmp/ft.parts/got.*)
declare -A write_failed=()
while read -r i; do write_failed[$i]=1; done </tmp/ft.failed
for ((i = 0; i < blocks; i++)); do
	[ -n "${write_failed[$i]:-}" ] || [ "${got_sum[$i]}" = "${new_sum[$i]}" ] ||
		fail "block $i: its write succeeded but it reads back otherwise"
	[ "${got_sum[$i]}" = "${old_sum[$i]}" ] || [ "${got_sum[$i]}" = "${new_sum[$i]}" ] ||
		fail "block $i: reads back neither its old nor its new contents"
done
put /tmp/ft.new "$map" "$bs"
[ "$(sha_of "$map" $((blocks * bs)) "$bs")" = "$(sha256sum </tmp/ft.new | cut -d' ' -f1)" ] ||
	fail "after the faults stopped, a full write does not read back"
ok "after the faults: every successful write reads back, a full write and read back work"
printf 'FAULTS injected=%s\n' "$injected"
