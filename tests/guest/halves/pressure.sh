#!/usr/bin/env bash
# DESCRIPTION: I/O stays correct while the allocator fails this module (make harden)
#   qemu/harden runs it in a small guest of the debug kernel
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: debug-kernel
#
# pressure.sh: I/O makes progress and stays correct while the allocator fails this
# module. For make harden, on the debug
# kernel (failslab, fail_page_alloc, the stack-trace filter), in a small guest;
# needs ours as crypt_lbs (`--module both`).
# failslab and fail_page_alloc fail a share of the allocations made with this
# module on the stack (require-start/require-end: its text), waiting ones included.
# At 512, 4096 and the largest sector size: fio, 8 jobs of random writes and reads
# with crc32c verification, errors fatal; then a verify-only pass after the mapping
# was reloaded. No I/O error may reach fio; the bounce pages never exceed the bound
# plus the reserve, and all come back when the device goes. Prints
# "PRESSURE bytes=N faults=N" for make harden's summary.
# The share is 20 %. The ramdisk is filled first (brd allocates a page on its
# first write), so only this module's allocations can fail.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

dev=/dev/ram0
key=$(test_key 64)
dbg=/sys/kernel/debug
params=/sys/module/dm_crypt_lbs/parameters
on_exit dm_remove lbs-pr
on_exit sh -c "for f in failslab fail_page_alloc; do echo 0 >$dbg/\$f/probability; done 2>/dev/null"

[ -d "$dbg/failslab" ] || mount -t debugfs nodev "$dbg" 2>/dev/null || true
for f in failslab fail_page_alloc; do
	[ -d "$dbg/$f" ] || fail "no $dbg/$f: the kernel has no $f (the debug kernel, arm64-64k-debug, has)"
done
# the module's core: its address and size in /proc/modules
read -r start size < <(awk '$1 == "dm_crypt_lbs" { print $6, $2 }' /proc/modules)
[ -n "${start:-}" ] || fail "dm_crypt_lbs is not in /proc/modules"
[ "$start" != 0x0000000000000000 ] || fail "/proc/modules hides the module's address (kptr_restrict)"
end=$(printf '0x%x' "$((start + size))")

inject() {	# inject PROBABILITY: fail that share of this module's allocations
	local f
	for f in failslab fail_page_alloc; do
		echo "$start" >"$dbg/$f/require-start"
		echo "$end" >"$dbg/$f/require-end"
		echo 30 >"$dbg/$f/stacktrace-depth"
		echo 1000000 >"$dbg/$f/times"
		echo 0 >"$dbg/$f/space"
		echo 0 >"$dbg/$f/verbose"
		echo "$1" >"$dbg/$f/probability"
	done
	echo N >"$dbg/failslab/ignore-gfp-wait"
	echo N >"$dbg/fail_page_alloc/ignore-gfp-wait"
}

# injected: the failures injected since inject set "times" (it counts down)
injected() {
	echo $((2000000 - $(cat "$dbg/failslab/times") - $(cat "$dbg/fail_page_alloc/times")))
}

# brd allocates a page on the first write to it: fill the ramdisk now, so that
# only this module's allocations can fail under the filter
dd if=/dev/zero of="$dev" bs=1M count=16 oflag=direct status=none
bytes=0
faults=0
echo 0 >"$params/bounce_pages_peak"
peak=0
limit=$(cat "$params/max_bounce_pages")
# the bound in effect, before any device exists (0 would be the unset default)
[ "$limit" -gt 0 ] || fail "max_bounce_pages reads $limit before the first device: not the bound in effect"
reserve=$((1048576 / $(page_size)))
[ "$reserve" -le 256 ] || reserve=256

for ss in 512 4096 "$(bound)"; do
	opts=""
	[ "$ss" = 512 ] || opts="1 sector_size:$ss"
	dmsetup create lbs-pr --table "0 $((16 << 11)) crypt_lbs aes-xts-plain64 $key 0 $dev 0 $opts" ||
		fail "ss=$ss: refused: $(ti_error)"
	bs=$((ss > 4096 ? ss : 4096))
	inject 20
	if ! fio_ok /tmp/pr.fio --name=pr --filename="$(dm_blkdev lbs-pr)" --rw=randrw --bs="$bs" --direct=1 \
		--ioengine=libaio --iodepth=8 --numjobs=8 --size=2m --offset_increment=2m \
		--verify=crc32c --verify_fatal=1 --randrepeat=1; then
		inject 0
		cat /tmp/pr.fio
		fail "ss=$ss: fio under injected allocation failures reported errors"
	fi
	n=$(injected)
	inject 0
	# bounce_pages_peak sums the peaks of the devices there now: read with the
	# device present (after its removal it reads 0, and the bound below would
	# hold whatever the module did)
	p=$(cat "$params/bounce_pages_peak")
	[ "$p" -le "$peak" ] || peak=$p
	faults=$((faults + n))
	[ "$n" -gt 0 ] || fail "ss=$ss: no allocation failure was injected: the filter missed this module"
	dm_remove lbs-pr
	dmsetup create lbs-pr --table "0 $((16 << 11)) crypt_lbs aes-xts-plain64 $key 0 $dev 0 $opts"
	fio_ok /tmp/pr.fio --name=pr --filename="$(dm_blkdev lbs-pr)" --rw=randrw --bs="$bs" --direct=1 \
		--ioengine=libaio --iodepth=8 --numjobs=8 --size=2m --offset_increment=2m \
		--verify=crc32c --verify_fatal=1 --randrepeat=1 --verify_only ||
		{ cat /tmp/pr.fio; fail "ss=$ss: verify-only pass after reload failed"; }
	dm_remove lbs-pr
	bytes=$((bytes + 8 * 2 * 1048576))
	ok "ss=$ss: 8 jobs randrw bs=$bs iodepth 8 verified with 20% of this module's allocations failing ($n failed); again after reload"
done
[ "$peak" -gt 0 ] || fail "bounce pages: the peak read 0 with every device: the writes took no bounce page, or the peak is not kept"
[ "$peak" -le $((limit + reserve)) ] || fail "bounce pages: peak $peak above the bound $limit + reserve $reserve"
held=$(cat "$params/bounce_pages")
[ "$held" = 0 ] || fail "bounce pages: $held still held with no device"
ok "bounce pages: peak $peak <= bound $limit + reserve $reserve; none held after"
printf 'PRESSURE bytes=%s faults=%s\n' "$bytes" "$faults"
