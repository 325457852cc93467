#!/usr/bin/env bash
# DESCRIPTION: suspend, reload and deferred remove while fio writes, every cycle verified
# BOOT: both
# KERNELS: amd64-4k
#   make harden runs 500 cycles on the debug kernel
# FULL-KERNELS: all
# LIMIT: 400 12 cycles under fio with each cipher, ~110 s loaded
# NEEDS: engine
# ORDER: 170
#
# teardown.sh: a device's end and its changes while fio writes (the writer's wake-up raced the destructor). Needs ours as crypt_lbs (`--module
# both`); with the engine, /lbs/kmod/lbs-engine.ko. LBS_TEARDOWN_CYCLES cycles
# (default 12; make harden runs 500 on the debug kernel), numbered from
# LBS_TEARDOWN_FIRST (default 1), with each cipher in
# LBS_TEARDOWN_CIPHERS (default "cpu engine"). A cycle makes the device and starts
# fio (random direct writes of 16 KiB or one sector, in bursts of 16 in flight
# paced to last about 2 s, then its crc32c verification pass),
# then, by turns:
# - suspend and resume, three times, while fio writes;
# - reload the same table and resume, while fio writes;
# - a deferred remove while fio writes: the device goes the moment fio closes it,
#   right after its last writes completed (where the wake-up raced); fio's
#   verification then runs on a new mapping of the same table;
# fio must pass its verification every time, and each device must be gone after
# its cycle. The kernel's reports (KASAN, lockdep, a WARN: suite.sh) fail the
# test; make harden's leakscan counts leaks after it.
# A race needs luck to show: this runs the paths that had it under KASAN and
# lockdep; it cannot prove the race absent. make harden's runs:
# results/harden.rst.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

cycles=${LBS_TEARDOWN_CYCLES:-12}
# the first cycle's number (its fio seed and which change it makes): a long run
# split over boots goes on where the last one ended
first=${LBS_TEARDOWN_FIRST:-1}
case $cycles:$first in *[!0-9:]* | :* | *:) fail "LBS_TEARDOWN_CYCLES and LBS_TEARDOWN_FIRST must be numbers" ;; esac
last=$((first + cycles - 1))
ciphers=${LBS_TEARDOWN_CIPHERS:-cpu engine}
dev=/dev/ram0
size_mib=8
len=$((size_mib << 11))
key=$(test_key 64)
name="lbs-td"
bs=$(($(bound) > 16384 ? $(bound) : 16384))
why=""

on_exit dm_remove "$name"
on_exit stop_fio

# run_fio MAP FIO-ARGS...: the cycle's fio job on MAP (its seed is the cycle's,
# so a later --verify_only pass checks what this one wrote)
run_fio() {
	local map=$1
	shift
	fio --name=td --filename="$map" --rw=randwrite --bs="$bs" --direct=1 --ioengine=libaio \
		--iodepth=16 --size="${size_mib}m" --verify=crc32c --verify_fatal=1 \
		--randseed=$((cycle + 1000)) "$@"
}
# start_fio MAP LOG FIO-ARGS...: fio writes (and verifies, unless told not to) MAP
# in the background ($fio_pid)
start_fio() {
	local map=$1 log=$2
	shift 2
	run_fio "$map" "$@" >"$log" 2>&1 &
	fio_pid=$!
}
# end_fio LOG WHAT: wait for fio; it must have passed its verification
end_fio() {
	local rc=0
	wait "$fio_pid" || rc=$?
	fio_pid=""
	if [ "$rc" != 0 ] || ! fio_clean "$1"; then
		tail -n 15 "$1"
		fail "fio failed (status $rc) in cycle $cycle ($2, $cipher cipher)"
	fi
}

# wait_open MAP: true once fio's job holds the device open: open, and some of
# its writes done. Open alone is not enough: fio opens the device once to learn
# its size and closes it before its job (a process of its own, slow to start on
# the debug kernel) opens it to write; a deferred remove in that gap takes the
# device away from under the job (seen at cycle 182 of 500 on the debug
# kernel). False, saying why, if fio ended first or 10 s passed.
wait_open() {
	local stat=/sys/block/${1#/dev/}/stat
	for _ in $(seq 100); do
		if [ "$(dmsetup info "$name" | awk '/^Open count:/ { print $3 }')" != 0 ] &&
			[ "$(awk '{ print $5 }' "$stat")" -gt 0 ]; then
			return 0
		fi
		if ! kill -0 "$fio_pid" 2>/dev/null; then
			why="fio ended before it was seen holding $name (open, some writes done)"
			return 1
		fi
		sleep 0.1
	done
	why="fio did not hold $name open within 10 s"
	return 1
}

# fio's pace: bursts of 16 writes (the queue full, as unpaced) with a pause
# after each, so that every job's writes last about 2 s whatever the guest's
# speed and fio is still writing when the device is seen open and changed (an
# unpaced job of 8 MiB on a ramdisk, 40 ms, can open, write, verify and close
# between two looks under a loaded host: the cycle would test nothing;
# --rate_iops would keep one write in flight)
pace=(--thinktime=$((2000000 * 16 / ((size_mib << 20) / bs))) --thinktime_blocks=16)

for cipher in $ciphers; do
	case $cipher in
	cpu) spec=aes-xts-plain64 ;;
	engine)
		[ -d /sys/module/lbs_engine ] || load_engine latency_us=200
		spec=capi:lbs-engine-xts-aes-plain64
		;;
	*) fail "LBS_TEARDOWN_CIPHERS: unknown cipher '$cipher' (cpu, engine)" ;;
	esac
	table="0 $len crypt_lbs $spec $key 0 $dev 0 1 sector_size:$(bound)"
	counts=(0 0 0)
	for ((cycle = first; cycle <= last; cycle++)); do
		dmsetup create "$name" --table "$table" || fail "cycle $cycle: ours refused $table: $(ti_error)"
		map=$(dm_blkdev "$name")
		log=/tmp/teardown.fio
		op=$((cycle % 3))
		# a deferred remove takes the device when fio closes it, and fio may
		# reopen it for its verification pass: that pass runs on a new mapping
		phase=("${pace[@]}")
		[ "$op" != 2 ] || phase+=(--do_verify=0)
		start_fio "$map" "$log" "${phase[@]}"
		# fio holds the device open before anything is done to it
		if ! wait_open "$map"; then
			end_fio "$log" "before it was seen holding the device"
			fail "cycle $cycle: $why (its writes are paced to last 2 s)"
		fi
		sleep 0.2
		case $op in
		0)
			for _ in 1 2 3; do
				dmsetup suspend "$name" || fail "cycle $cycle: suspend under fio failed"
				dmsetup resume "$name" || fail "cycle $cycle: resume under fio failed"
			done
			end_fio "$log" "suspend and resume"
			dmsetup remove "$name" || fail "cycle $cycle: remove after fio failed"
			;;
		1)
			dmsetup reload "$name" --table "$table" || fail "cycle $cycle: reload under fio refused"
			dmsetup suspend "$name" || fail "cycle $cycle: suspend for the reload failed"
			dmsetup resume "$name" || fail "cycle $cycle: resume of the reloaded table failed"
			end_fio "$log" "reload"
			dmsetup remove "$name" || fail "cycle $cycle: remove after fio failed"
			;;
		2)
			dmsetup remove --deferred "$name" || fail "cycle $cycle: deferred remove under fio refused"
			end_fio "$log" "deferred remove"
			;;
		esac
		counts[op]=$((counts[op] + 1))
		for _ in $(seq 50); do
			dmsetup info "$name" >/dev/null 2>&1 || break
			sleep 0.1
		done
		! dmsetup info "$name" >/dev/null 2>&1 || fail "cycle $cycle: $name still exists 5 s after its removal"
		if [ "$op" = 2 ]; then
			dmsetup create "$name" --table "$table" || fail "cycle $cycle: ours refused $table again: $(ti_error)"
			if ! run_fio "$(dm_blkdev "$name")" --verify_only >"$log" 2>&1 || ! fio_clean "$log"; then
				tail -n 15 "$log"
				fail "cycle $cycle: what fio wrote before the deferred remove does not verify on a new mapping ($cipher cipher)"
			fi
			dmsetup remove "$name" || fail "cycle $cycle: remove after the verification failed"
		fi
		# progress for the long runs (make harden's 500 cycles)
		(((cycle - first + 1) % 50)) ||
			echo "teardown: $cipher cipher: $((cycle - first + 1)) of $cycles cycles done (up to cycle $cycle) after ${SECONDS} s"
	done
	ok "$cipher cipher: $cycles cycles (${first}-${last}) under fio randwrite (iodepth 16, sector_size $(bound)): ${counts[0]} with 3 suspend/resume, ${counts[1]} reloads, ${counts[2]} deferred removes as fio closed; every verification passed, every device gone"
done
