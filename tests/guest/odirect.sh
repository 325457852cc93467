#!/usr/bin/env bash
# DESCRIPTION: O_DIRECT not aligned to the sector is EINVAL, never EIO or wrong data
# BOOT: both
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
# ORDER: 80
#
# odirect.sh: O_DIRECT that is aligned to 512 but not to the sector size is
# refused by the block layer with EINVAL, never EIO or wrong data. Needs ours as crypt_lbs (`--module
# both`). On mappings of sector size 4096 and this kernel's bound: a 512-byte
# read and write; a full-sector read and write from a
# buffer 512 bytes past a page boundary (fio mem_align=512). Each must fail with
# EINVAL (fio, whose O_DIRECT errors are its own: busybox dd quietly retries
# without O_DIRECT); the same I/O from an aligned buffer works (a control); the device's
# data is unchanged and the kernel logs no I/O error.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
len=2048	# 1 MiB
k64=$(test_key 64)
on_exit dm_remove lbs-odirect
head -c $((len * 512)) /dev/urandom >/tmp/odirect.data
want=$(sha256sum </tmp/odirect.data | cut -d' ' -f1)

einval() {	# einval WHAT FIO-ARGS...: the fio run must fail with EINVAL (err=22)
	local what=$1 out
	shift
	if out=$(fio_one "$@" 2>&1); then
		soft_fail "$what: succeeded, expected EINVAL"
		return 0
	fi
	case $out in
	*"err=22"* | *"Invalid argument"*) ok "$what: EINVAL" ;;
	*) soft_fail "$what: failed, but not with EINVAL: $(printf '%s' "$out" | grep -iE 'err|error' | head -n 3)" ;;
	esac
}

# fio_one RW BS MEM_ALIGN [OFFSET]: one O_DIRECT I/O of BS bytes (psync)
fio_one() {
	fio --name=align --filename=/dev/mapper/lbs-odirect --rw="$1" --bs="$2" --size="$2" \
		--offset="${4:-0}" --direct=1 --ioengine=psync --mem_align="$3" --zero_buffers
}

sizes=(4096)
[ "$(bound)" = 4096 ] || sizes+=("$(bound)")
for ss in "${sizes[@]}"; do
	dmsetup create lbs-odirect --table "0 $len crypt_lbs aes-xts-plain64 $k64 0 $dev 0 1 sector_size:$ss"
	put /tmp/odirect.data /dev/mapper/lbs-odirect 65536
	dmesg -c >/dev/null
	m=/dev/mapper/lbs-odirect
	einval "ss=$ss: 512-byte O_DIRECT read" read 512 0
	einval "ss=$ss: 512-byte O_DIRECT read at offset 512" read 512 0 512
	einval "ss=$ss: 512-byte O_DIRECT write at offset 512" write 512 0 512
	einval "ss=$ss: $ss-byte O_DIRECT read into a buffer 512 past a page" read "$ss" 512
	einval "ss=$ss: $ss-byte O_DIRECT write from a buffer 512 past a page" write "$ss" 512
	fio_one read "$ss" 0 >/tmp/odirect.fio 2>&1 || { cat /tmp/odirect.fio; fail "ss=$ss: the aligned control read failed"; }
	ok "ss=$ss: the same read from an aligned buffer works"
	[ "$(sha_of "$m" $((len * 512)) 65536)" = "$want" ] || fail "ss=$ss: the data changed"
	! dmesg | grep -qiE 'I/O error|critical|crypt.*error' || fail "ss=$ss: the kernel logged an error: $(dmesg | grep -iE 'I/O error|critical|crypt.*error' | tail -n 3)"
	ok "ss=$ss: data unchanged, no I/O error logged"
	dm_remove lbs-odirect
done
