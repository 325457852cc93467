#!/usr/bin/env bash
# DESCRIPTION: fio verifies concurrent direct I/O at every sector size, after a reload too
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 300 two jobs per sector size, twice
# NEEDS: cryptd
# MAY-LACK: cryptd arm64-16k arm64-4k arm64-4k-6.1
#   Debian's arm64 kernels are built without CONFIG_CRYPTO_CRYPTD: the
#   asynchronous case is skipped there
# ORDER: 90
#
# fio.sh: data integrity under concurrent direct I/O at every sector size this
# kernel accepts. Needs ours as crypt_lbs
# (`--module both`). Per size: fio randrw, bs = sector size, O_DIRECT, libaio,
# iodepth 4, 2 jobs on disjoint regions (128 I/Os each, 64 KiB to 1 MiB), crc32c verification with
# verify_fatal; then a second, verify-only pass of the same workload after the
# mapping was removed and loaded again (the data comes back from the ciphertext on
# the ramdisk, not from any cache). Zero errors, exit 0, and fio's per-job error
# counter 0. A control shows the verification bites: the same verify-only pass
# through a mapping with another key must fail.
# Then the same through an asynchronous cipher (lib.sh: cryptd_spec) at the
# largest size; skipped (LBS-SKIP) where the kernel has no cryptd.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
len=$((4 << 11))	# 4 MiB
key=$(test_key 64)
on_exit dm_remove lbs-fio
log=/tmp/fio.log

map() {	# map SS KEY [CIPHER]
	local opts=1 ivls="" cipher=${3:-aes-xts-plain64}
	[ "$1" -le 512 ] || { opts=2 ivls=" iv_large_sectors"; }
	dmsetup create lbs-fio --table "0 $len crypt_lbs $cipher $2 0 $dev 0 $opts sector_size:$1$ivls" ||
		fail "ss=$1: refused: $(ti_error)"
}

# run SS [fio options]: the workload; prints fio's output to $log; returns fio's status
run() {
	local ss=$1
	shift
	local size=$((ss * 128))	# 128 I/Os a job (each costs ~10 ms under TCG), 64K..1M
	[ "$size" -ge 65536 ] || size=65536
	[ "$size" -le 1048576 ] || size=1048576
	fio --name=lbs --filename=/dev/mapper/lbs-fio --rw=randrw --bs="$ss" --direct=1 \
		--ioengine=libaio --iodepth=4 --numjobs=2 --size="$size" --offset_increment="$size" \
		--verify=crc32c --verify_fatal=1 --randrepeat=1 "$@" >"$log" 2>&1
}

# errors_zero WHAT: every job reported err=0 and no verify failure was printed
errors_zero() {
	local jobs
	jobs=$(grep -c 'err= *0' "$log" || true)
	[ "$jobs" -ge 2 ] || { cat "$log"; fail "$1: fio reported $jobs jobs with err=0, expected 2"; }
	fio_clean "$log" || { cat "$log"; fail "$1: fio reported errors"; }
}

for ss in $(sizes_upto "$(bound)"); do
	dd if=/dev/zero of="$dev" bs=1M count=4 oflag=direct status=none
	map "$ss" "$key"
	[ "$(lbsize "$(dm_blkdev lbs-fio)")" = "$ss" ] || fail "ss=$ss: logical_block_size $(lbsize "$(dm_blkdev lbs-fio)")"
	run "$ss" || { cat "$log"; fail "ss=$ss: fio randrw with verify exited non-zero"; }
	errors_zero "ss=$ss randrw"
	written=$(sed -n 's/.*write: IOPS=[^,]*, BW=[^(]*(\([^)]*\)).*/\1/p' "$log" | head -n 1)
	dm_remove lbs-fio
	map "$ss" "$key"
	run "$ss" --verify_only || { cat "$log"; fail "ss=$ss: verify-only pass after reloading the mapping failed"; }
	errors_zero "ss=$ss verify-only"
	dm_remove lbs-fio
	ok "ss=$ss: fio randrw bs=$ss direct libaio iodepth=4 2 jobs, crc32c verified, again after reload (write ${written:-?})"
done

# The same through an asynchronous cipher (cryptd queues and backlogs requests,
# as an offload engine does) at the largest sector size, where the kernel has it.
async_spec=$(cryptd_spec crypt_lbs "$dev" "$key")
ss=$(bound)
if [ -n "$async_spec" ]; then
	map "$ss" "$key" "$async_spec"
	run "$ss" || { cat "$log"; fail "async ss=$ss: fio randrw with verify through cryptd exited non-zero"; }
	errors_zero "async ss=$ss randrw"
	dm_remove lbs-fio
	ok "async ss=$ss: fio randrw through $async_spec, crc32c verified"
else
	skip_lacking cryptd "the asynchronous case" "cryptd(xts) does not load"
fi

# the control: another key must make the verification fail
ss=4096
map "$ss" "$key"
run "$ss" || fail "control: the write pass failed"
dm_remove lbs-fio
map "$ss" "$(test_key 64 | tr 0 f)"
if run "$ss" --verify_only; then
	cat "$log"
	fail "control: verify-only through a mapping with another key passed; the verification does not check anything"
fi
dm_remove lbs-fio
ok "control: verify-only through another key fails as it must"
