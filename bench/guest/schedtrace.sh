#!/usr/bin/env bash
# DESCRIPTION: where a fio job's time goes, traced (bench/schedtrace.py reads it)
#
# schedtrace.sh [--runtime S] [--job JOB] [--reps N] VARIANT...: where the time
# of a fio job goes, target against target (find why random writes at a large sector are slower than stock's at 4096). Not a
# test: a measurement for bench/schedtrace.py.
#
# VARIANT is TARGET:SECTOR_SIZE[:inline], TARGET crypt (stock) or crypt_lbs
# (ours; `qemu/run --module both`); inline adds no_read_workqueue
# no_write_workqueue. Each variant gets its own 64 MiB region of /dev/ram0
# (written once first) and, per repetition, one fio run (JOB, default
# randwrite; 64 KiB blocks, 1 MiB for seq*; direct, libaio, iodepth 4, as make
# bench) with the scheduler's switch and wake-up events traced. Prints
#   SCHED-RUN <variant> <rep> <MiB/s> <MiB moved>
# then the trace's lines as "SCHED-TRACE <variant> <rep> <line>".
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../../tests/guest/common/lib.sh"

runtime=3 job=randwrite reps=1
while [ $# -gt 0 ]; do
	case $1 in
	--runtime) runtime=$2; shift 2 ;;
	--job) job=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	-*) fail "unknown option '$1'" ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || fail "usage: schedtrace.sh [--runtime S] [--job JOB] [--reps N] TARGET:SS[:inline]..."
rwbs=$(bench_job "$job") || fail "unknown job '$job' (seqread, seqwrite, randread, randwrite)"
read -r rw bs <<<"$rwbs"

tr=/sys/kernel/tracing
[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null || true
[ -d "$tr/events/sched/sched_switch" ] || fail "no sched_switch event in $tr: the kernel has no tracing"
region=$((64 << 11))
[ "$(blockdev --getsz /dev/ram0)" -ge $(($# * region)) ] ||
	fail "the ramdisk holds fewer than $# regions of 64 MiB (qemu/run --ramdisk $(($# * 64)))"
key=$(test_key 64)
out=/tmp/schedtrace-fio.json
on_exit dmsetup remove_all
on_exit sh -c "echo 0 >$tr/tracing_on"

i=0
for v in "$@"; do
	IFS=: read -r target ss inline <<<"$v"
	opts="1 sector_size:$ss"
	[ -z "$inline" ] || opts="3 sector_size:$ss no_read_workqueue no_write_workqueue"
	dmsetup create "lbs-st$i" --table "0 $region $target aes-xts-plain64 $key 0 /dev/ram0 $((i * region)) $opts" ||
		fail "$v: the table was refused: $(ti_error)"
	dd if=/dev/zero of="$(dm_blkdev "lbs-st$i")" bs=1M count=64 oflag=direct status=none
	i=$((i + 1))
done

echo 0 >"$tr/tracing_on"
echo 16384 >"$tr/buffer_size_kb"
: >"$tr/set_event"
for e in sched:sched_switch sched:sched_wakeup sched:sched_waking; do
	echo "$e" >>"$tr/set_event"
done
for rep in $(seq 1 "$reps"); do
	i=0
	for v in "$@"; do
		echo >"$tr/trace"
		echo 1 >"$tr/tracing_on"
		fio --name=st --filename="$(dm_blkdev "lbs-st$i")" --rw="$rw" --bs="$bs" --direct=1 \
			--ioengine=libaio --iodepth=4 --time_based --runtime="$runtime" --size=64m \
			--output-format=json >"$out" 2>&1 || { cat "$out"; fail "$v: fio failed"; }
		echo 0 >"$tr/tracing_on"
		bytes=$(fio_bytes "$out" "${rw#rand}") || { cat "$out"; fail "$v: no bw_bytes or io_bytes in fio's output"; }
		read -r bw io <<<"$bytes"
		mibps=$(awk -v b="$bw" 'BEGIN { printf "%.3f", b / 1048576 }')
		mib=$(awk -v b="$io" 'BEGIN { printf "%.3f", b / 1048576 }')
		echo "SCHED-RUN $v $rep $mibps $mib"
		grep -v '^#' "$tr/trace" | sed "s|^|SCHED-TRACE $v $rep |"
		i=$((i + 1))
	done
done
ok "schedtrace: $# variants, $reps repetitions of $job"
