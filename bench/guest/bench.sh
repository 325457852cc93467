#!/usr/bin/env bash
# DESCRIPTION: the guest half of make bench (qemu/bench): throughput and CPU per MiB
#
# bench.sh [--reps N] [--runtime S] [--sizes "..."] [--engine-sizes "..."]
#          [--ciphers "cpu engine"] [--limit-ms MS]: the guest half of `make bench`
# (qemu/bench). Needs stock as crypt and ours as crypt_lbs
# (`--module both`), the engine (/lbs/kmod/lbs-engine.ko) and a 320 MiB ramdisk.
#
# For each cipher (cpu: aes-xts-plain64; engine: capi:lbs-engine-xts-aes-plain64),
# sector size and fio job (seqread/seqwrite: 1 MiB blocks; randread/randwrite:
# 64 KiB; direct, libaio, iodepth 4, time-based), N repetitions, each one
# interleaving stock, ours, and both again with no_read_workqueue
# no_write_workqueue (stock only at the sizes it accepts), each on its own
# 64 MiB region of the ramdisk. Then the limits in the same
# boot: the raw ramdisk per job (N runs), and per unit size the software
# xts(aes) and the engine driven directly from inside the kernel
# (/sys/kernel/lbs_engine/measure), encryption and decryption. Prints records
# for the host (bench/bench.py reads them; MiB/s):
#   BENCH-PLAN <steps>
#   BENCH-INFO <key> <value...>
#   BENCH-RUN <step> <target> <cipher> <flags|-> <sector_size> <job> <rep> <mibps> <cpu_ms_per_mib>
#   BENCH-LIMIT <step> <limit> <cipher> <sector_size> <job> <mibps>
# cpu_ms_per_mib is the guest's CPU time (every CPU's busy time in /proc/stat,
# fio's own included) during the fio run, less the engine's channel threads'
# (lbs-engine/N: they stand in for the hardware and do its AES in software),
# in milliseconds per MiB moved.
# A measurement that fails stops the run with a FAIL line saying which.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../../tests/guest/common/lib.sh"

reps=5 runtime=3 limit_ms=1000 ciphers="cpu engine"
sizes="512 4096 $(page_size)"
engine_sizes="4096 $(page_size)"
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--engine-sizes) engine_sizes=$2; shift 2 ;;
	--ciphers) ciphers=$2; shift 2 ;;
	--limit-ms) limit_ms=$2; shift 2 ;;
	*) fail "unknown option '$1'" ;;
	esac
done
# sorted_words "WORDS": the numbers, sorted, each once, on one line
sorted_words() { tr -s ' ' '\n' <<<"$1" | sed '/^$/d' | sort -nu | tr '\n' ' '; }
sizes=$(sorted_words "$sizes")
engine_sizes=$(sorted_words "$engine_sizes")

jobs="seqread seqwrite randread randwrite"
ko=$LBS_ENGINE_KO
sysd=/sys/kernel/lbs_engine
spec_engine=capi:lbs-engine-xts-aes-plain64
region=$((64 << 11))	# 64 MiB in 512-byte sectors
key=$(test_key 64)
dev=/dev/ram0
out=/tmp/bench-fio.json
inline_flags="no_read_workqueue no_write_workqueue"
variants_all="stock ours stockinline oursinline"
regions=$(($(wc -w <<<"$variants_all") + 1))	# one per variant, and the raw ramdisk's

[ "$(blockdev --getsize64 "$dev")" -ge $((regions << 26)) ] ||
	fail "the ramdisk is smaller than $((regions * 64)) MiB (qemu/run --ramdisk $((regions * 64)))"
[ -f "$ko" ] || fail "no $ko: the engine is not built for $(uname -r) (qemu/lib/build-engine)"
[ -n "$(target_version crypt_lbs)" ] || fail "ours is not loaded as crypt_lbs (qemu/run --module both)"
# shellcheck disable=SC2119 # the engine with its default parameters
load_engine
# the engine's channel threads, started at load (their CPU time is not the host's)
engine_stats=()
for f in /proc/[0-9]*/stat; do
	read -r line <"$f" 2>/dev/null || continue
	case $line in *" (lbs-engine/"*) engine_stats+=("$f") ;; esac
done
[ "${#engine_stats[@]}" -gt 0 ] || fail "no lbs-engine/N thread after insmod $ko"
tck=$(getconf CLK_TCK)
for v in $variants_all; do on_exit dm_remove "lbs-bench-$v"; done

# the sizes each cipher runs at, and the variants at a size
sizes_of() { if [ "$1" = engine ]; then echo "$engine_sizes"; else echo "$sizes"; fi; }
variants() { if [ "$1" -le 4096 ]; then echo "$variants_all"; else echo "ours oursinline"; fi; }

steps=0
for cipher in $ciphers; do
	for ss in $(sizes_of "$cipher"); do
		steps=$((steps + $(variants "$ss" | wc -w) * 4 * reps))
	done
done
all_sizes=$(sorted_words "$sizes $engine_sizes")
nlim=$(($(echo "$all_sizes" | wc -w) * 2))
steps=$((steps + 4 * reps + nlim))
case " $ciphers " in *" engine "*) steps=$((steps + nlim)) ;; esac
printf 'BENCH-PLAN %s\n' "$steps"
printf 'BENCH-INFO kernel_release %s\n' "$(uname -r)"
printf 'BENCH-INFO page_size %s\n' "$(page_size)"
printf 'BENCH-INFO targets stock=%s ours=%s\n' "$(target_version crypt)" "$(target_version crypt_lbs)"
printf 'BENCH-INFO ours_srcversion %s\n' "$(modinfo -F srcversion /lbs/kmod/dm-crypt-lbs.ko 2>/dev/null || echo unknown)"
for p in latency_us channels queue_depth error_rate_ppm; do
	printf 'BENCH-INFO engine_%s %s\n' "$p" "$(cat "/sys/module/lbs_engine/parameters/$p")"
done
printf 'BENCH-INFO fio runtime=%ss reps=%s iodepth=4 direct libaio\n' "$runtime" "$reps"
step=0

# cpu_ticks: busy clock ticks of every CPU (user nice system irq softirq
# steal) less the engine threads' (user system); the clock read last
cpu_ticks() {
	local f line eng=0 busy
	for f in "${engine_stats[@]}"; do
		read -r line <"$f" || fail "engine thread $f is gone"
		line=${line##*) }
		eng=$((eng + $(awk '{ print $12 + $13 }' <<<"$line")))
	done
	busy=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat)
	echo $((busy - eng))
}

# fio_mibps DEV JOB [fio options]: one fio run; prints its throughput in MiB/s
# and the CPU time it cost in ms per MiB moved
fio_mibps() {
	local dev=$1 job=$2 rw bs sec t0 t1 bytes rwbs
	shift 2
	rwbs=$(bench_job "$job") || fail "unknown fio job '$job'"
	read -r rw bs <<<"$rwbs"
	t0=$(cpu_ticks)
	if ! fio --name=bench --filename="$dev" --rw="$rw" --bs="$bs" --direct=1 --ioengine=libaio \
		--iodepth=4 --time_based --runtime="$runtime" --size=64m "$@" --output-format=json >"$out" 2>&1; then
		cat "$out"
		fail "fio $job on $dev failed"
	fi
	t1=$(cpu_ticks)
	sec="read"
	case $job in *write) sec="write" ;; esac
	bytes=$(fio_bytes "$out" "$sec") ||
		{ cat "$out"; fail "fio $job on $dev: no bw_bytes or io_bytes for $sec in its JSON output"; }
	awk -v ticks=$((t1 - t0)) -v tck="$tck" -v bytes="$bytes" 'BEGIN {
		split(bytes, b, " ")
		if (b[2] <= 0) exit 1
		printf "%.3f %.3f\n", b[1] / 1048576, ticks * 1000 / tck / (b[2] / 1048576)
	}'
}

# measure WHAT OP SIZE: the in-kernel rate in MiB/s (measure.c); prints it
measure() {
	local what op size bytes ns reqs driver
	echo "$1 $2 $3 $limit_ms" >"$sysd/measure" || fail "measure $1 $2 $3 failed: $(dmesg | tail -n 2)"
	read -r what op size bytes ns reqs driver <"$sysd/measure"
	[ "$what $op $size" = "$1 $2 $3" ] || fail "measure $1 $2 $3: the engine reported '$what $op $size'"
	printf 'BENCH-INFO driver_%s %s (%s requests of %s bytes in %s ns)\n' "$what" "$driver" "$reqs" "$size" "$ns" >&2
	awk -v b="$bytes" -v ns="$ns" 'BEGIN { printf "%.3f\n", b / 1048576 / (ns / 1e9) }'
}

# Every region written once: brd allocates a page on its first write, so
# reads of a never-written region would measure nothing but zero pages.
dd if=/dev/zero of="$dev" bs=1M count=$((regions * 64)) oflag=direct status=none

for cipher in $ciphers; do
	spec=aes-xts-plain64
	[ "$cipher" = cpu ] || spec=$spec_engine
	for ss in $(sizes_of "$cipher"); do
		vs=$(variants "$ss")
		i=0
		for v in $vs; do
			target=crypt_lbs opts="1 sector_size:$ss"
			case $v in stock*) target=crypt ;; esac
			case $v in *inline) opts="3 sector_size:$ss $inline_flags" ;; esac
			dmsetup create "lbs-bench-$v" --table "0 $region $target $spec $key 0 $dev $((i * region)) $opts" ||
				fail "$cipher ss=$ss $v: the table was refused: $(ti_error)"
			i=$((i + 1))
		done
		for job in $jobs; do
			for rep in $(seq 1 "$reps"); do
				for v in $vs; do
					step=$((step + 1))
					got=$(fio_mibps "$(dm_blkdev "lbs-bench-$v")" "$job")
					read -r mibps cpu <<<"$got"
					tgt=lbscrypt flags=-
					case $v in stock*) tgt=stock ;; esac
					case $v in *inline) flags=${inline_flags// /,} ;; esac
					printf 'BENCH-RUN %s %s %s %s %s %s %s %s %s\n' "$step" "$tgt" "$cipher" "$flags" "$ss" "$job" "$rep" "$mibps" "$cpu"
				done
			done
		done
		for v in $vs; do dm_remove "lbs-bench-$v"; done
	done
done

# the limits
for job in $jobs; do
	for rep in $(seq 1 "$reps"); do
		step=$((step + 1))
		mibps=$(fio_mibps "$dev" "$job" --offset=$(((regions - 1) * 64))m)
		mibps=${mibps% *}
		printf 'BENCH-LIMIT %s ramdisk - 0 %s %s\n' "$step" "$job" "$mibps"
	done
done
for what in cipher engine; do
	[ "$what" = cipher ] || case " $ciphers " in *" engine "*) ;; *) continue ;; esac
	label=cpu
	[ "$what" = cipher ] || label=engine
	for ss in $all_sizes; do
		for op in encrypt decrypt; do
			step=$((step + 1))
			mibps=$(measure "$what" "$op" "$ss")
			printf 'BENCH-LIMIT %s %s %s %s %s %s\n' "$step" "$what" "$label" "$ss" "$op" "$mibps"
		done
	done
done
ok "bench: $step steps"
