#!/usr/bin/env bash
# DESCRIPTION: suspend, key cycles, remove and reload under load (make harden)
#   qemu/harden runs it on the debug kernel
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: none
#
# lifecycle.sh: the device's life under load. For make harden; needs ours as crypt_lbs (`--module both`).
# - suspend, key wipe, key set, resume, over and over while fio writes and
#   verifies: fio sees no error and the data verifies;
# - dmsetup remove of an open device: EBUSY, the device and its data stay;
# - dmsetup reload to another sector_size on a live device: the new table takes
#   effect at resume (logical block size, table), reads work; reloaded back to
#   the first size, the data written before reads back (nothing was written
#   meanwhile: a unit of another size is another ciphertext);
# - the module cannot be unloaded while a device uses it.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

dev=/dev/ram0
key=$(test_key 64)
len=$((16 << 11))	# 16 MiB
on_exit dm_remove lbs-lc
on_exit stop_fio

dmsetup create lbs-lc --table "0 $len crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 sector_size:4096"
map=$(dm_blkdev lbs-lc)

# --- key cycles under fio
fio --name=lc --filename="$map" --rw=randrw --bs=16k --direct=1 --ioengine=libaio --iodepth=8 \
	--numjobs=2 --size=4m --offset_increment=4m --verify=crc32c --verify_fatal=1 --randrepeat=1 \
	--time_based --runtime=20 >/tmp/lc.fio 2>&1 &
fio_pid=$!
cycles=0
while kill -0 "$fio_pid" 2>/dev/null; do
	dmsetup suspend lbs-lc
	dmsetup message lbs-lc 0 key wipe
	if dmsetup resume lbs-lc 2>/dev/null; then
		fail "resume succeeded with the key wiped"
	fi
	dmsetup message lbs-lc 0 key set "$key"
	dmsetup resume lbs-lc
	cycles=$((cycles + 1))
	sleep 0.5
done
wait "$fio_pid" || { cat /tmp/lc.fio; fail "fio failed across $cycles suspend/wipe/set/resume cycles"; }
if ! fio_clean /tmp/lc.fio; then
	cat /tmp/lc.fio
	fail "fio reported errors across $cycles key cycles"
fi
[ "$cycles" -ge 3 ] || fail "only $cycles key cycles ran during fio"
ok "$cycles cycles of suspend, key wipe, refused resume, key set, resume under fio randrw: verified, no error"

# --- remove while open
head -c $((len * 512)) /dev/urandom >/tmp/lc.data
put /tmp/lc.data "$map" 1048576
want=$(sha256sum </tmp/lc.data | cut -d' ' -f1)
exec 7<"$map"
if out=$(dmsetup remove lbs-lc 2>&1); then
	exec 7<&-
	fail "dmsetup remove of an open device succeeded"
fi
case $out in *busy* | *Busy* | *EBUSY*) ;; *) exec 7<&-; fail "remove of an open device: not EBUSY: $out" ;; esac
exec 7<&-
[ "$(sha_of "$map" $((len * 512)) 1048576)" = "$want" ] || fail "after a refused remove the data differs"
ok "dmsetup remove of an open device: refused busy; data intact"

# --- reload to another sector_size and back
reload() {	# reload SS: load the table with sector_size SS, suspend, resume
	dmsetup reload lbs-lc --table "0 $len crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 sector_size:$1"
	dmsetup suspend lbs-lc
	dmsetup resume lbs-lc
	[ "$(lbsize "$map")" = "$1" ] || fail "after the reload to $1 and resume the logical block size is $(lbsize "$map")"
	case $(dmsetup table lbs-lc) in
	*"sector_size:$1") ;;
	*) fail "after the reload to $1 the table is $(dmsetup table lbs-lc)" ;;
	esac
}
dmsetup reload lbs-lc --table "0 $len crypt_lbs aes-xts-plain64 $key 0 $dev 0 1 sector_size:$(bound)"
[ "$(lbsize "$map")" = 4096 ] || fail "a reload changed the logical block size before resume"
dmsetup suspend lbs-lc
dmsetup resume lbs-lc
[ "$(lbsize "$map")" = "$(bound)" ] || fail "after resume the logical block size is $(lbsize "$map"), not $(bound)"
dd if="$map" of=/dev/null bs=1M iflag=direct status=none || fail "reads fail after the reload to $(bound)"
reload 4096
[ "$(sha_of "$map" $((len * 512)) 1048576)" = "$want" ] || fail "after reloading $(bound) and back to 4096 the data differs"
ok "reload to sector_size $(bound) on the live device: takes effect at resume; back to 4096, the data reads back"

# --- unload while in use
if rmmod dm_crypt_lbs 2>/dev/null; then
	fail "rmmod dm_crypt_lbs succeeded while a device used it"
fi
[ -d /sys/module/dm_crypt_lbs ] || fail "the module is gone"
[ "$(sha_of "$map" $((len * 512)) 1048576)" = "$want" ] || fail "after a refused rmmod the data differs"
ok "rmmod while a device uses the module: refused; data intact"
