#!/usr/bin/env bash
# DESCRIPTION: the guest half of make bench's reencrypt part (qemu/bench): lbscrypt reencrypt beside a dd copy
#
# reenc.sh [--mib N] [--reps N] [--hotzone BYTES] [--old-tool PATH]: the guest half of the
# reencrypt part of `make bench` (qemu/bench; Documentation/performance.rst).
# Needs ours as crypt (qemu/run --module lbscrypt), the tool, and brd as a
# module: it is loaded again with two ramdisks of N MiB (default 256), the
# volume on ram0 and the state file's ext4 on ram1, two disks of one kind.
#
# Two conversions of the whole of ram0: "4096-65536" (sector size 4096 -> 65536
# and key A -> B) and "key-65536" (key B -> C at 65536). For each, N
# repetitions (default 3), each one a dd copy through the conversion's two
# mappings over ram0 (the old parameters read-only -> the new, in place, 1 MiB
# blocks, O_DIRECT both sides, as the tool's private mappings), then
# `lbscrypt reencrypt` of the same conversion (--force: the volume holds no
# filesystem; the journal on ram1; hotzone the tool's default unless
# --hotzone). The bytes are not checked here (tests/guest/reencrypt.sh does):
# a conversion moves the same bytes whatever they hold. Prints records for the
# host (bench/reenc.py reads them; MiB/s):
#   REENC-PLAN <steps>
#   REENC-INFO <key> <value...>
#   REENC-RUN <step> <case> <rep> dd <bytes> <seconds> <mibps> -
#   REENC-RUN <step> <case> <rep> reencrypt <bytes> <seconds> <mibps> <steady_mibps>
# seconds and mibps are the whole command's (reencrypt's include its start:
# the two key verifiers' PBKDF2, the probe, the mappings, the journal's
# preallocation); steady_mibps is the rate between the tool's first and last
# progress records (--json, one a hotzone): the hotzones after the first, "-"
# with fewer than two records.
# Then, once a repetition, "online-key-65536": the volume opened with
# `lbscrypt open` (65536, key C) and converted online (`reencrypt
# --active-name`, key C -> A at 65536, --force: fio opens it O_DIRECT) while
# two fio jobs write 64 KiB blocks O_DIRECT at a fixed rate, each write's
# completion time, latency and offset logged (write_lat_log, log_offset):
# "far" into the volume's last quarter, "all" anywhere on it. The writes
# before the run starts are the baseline; "far"'s writes issued while the run
# converts the first half (before its progress record reaching half the
# volume) are a writer a whole quarter of the volume away from the hotzone;
# "all" meets the hotzone in flight now and then. Printed, in milliseconds:
#   REENC-STALL <step> <case> <rep> <baseline_max> <far_max> <far_p99> <far_writes>
#               <all_max> <hotzone_max> <hotzones>
# hotzone_max is the longest time between two progress records (one a
# hotzone; the first, which holds the run's start, left out): the run's
# slowest hotzone.
# With --old-tool PATH (the tool of the design before, which suspended NAME
# with its filesystem frozen for each hotzone: qemu/lib/old-design-tool), each
# repetition runs the online case a second time with that binary, its line's
# case "online-key-65536-old-design": the same writers, key A -> C back.
# A step that fails stops the run with a FAIL line saying which.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../../tests/guest/common/lib.sh"

mib=256 reps=3 hotzone='' old_tool=''
while [ $# -gt 0 ]; do
	case $1 in
	--mib) mib=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--hotzone) hotzone=$2; shift 2 ;;
	--old-tool) old_tool=$2; shift 2 ;;
	*) fail "unknown option '$1'" ;;
	esac
done
case $mib$reps$hotzone in *[!0-9]*) fail "--mib, --reps and --hotzone take whole numbers" ;; esac
[ "$(page_size)" -ge 65536 ] || fail "the reencrypt benchmark converts to 65536: a 64K-page kernel (page size here $(page_size))"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0 (qemu/run --module lbscrypt)"
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (make deb)"
[ -z "$old_tool" ] || [ -x "$old_tool" ] || fail "--old-tool $old_tool: not an executable file"

vol=/dev/ram0
state_dev=/dev/ram1
state_dir=/mnt/reenc-bench-state
bytes=$((mib << 20))
sectors=$((bytes / 512))

# two ramdisks of one kind: brd again, with rd_nr=2
grep -q '^brd ' /proc/modules || fail "brd is not a loaded module: cannot give it two ramdisks"
rmmod brd || fail "rmmod brd failed (is /dev/ram0 held?)"
modprobe brd rd_nr=2 rd_size=$((mib * 1024)) max_part=0 || fail "modprobe brd rd_nr=2 failed"
[ "$(blockdev --getsize64 "$state_dev")" = "$bytes" ] || fail "no $state_dev of $mib MiB after modprobe brd"
mkfs.ext4 -q -F "$state_dev" >/dev/null || fail "mkfs.ext4 of $state_dev failed"
mkdir -p "$state_dir"
mount "$state_dev" "$state_dir" || fail "cannot mount $state_dev"
on_exit umount "$state_dir"
on_exit dm_remove lbs-rb-old
on_exit dm_remove lbs-rb-new
on_exit dm_remove lbs-rb-live
# brd allocates a page on its first write: the volume written once first
dd if=/dev/zero of="$vol" bs=1M count="$mib" oflag=direct status=none || fail "cannot fill $vol"

key_a=/tmp/reenc-bench-a.key key_b=/tmp/reenc-bench-b.key key_c=/tmp/reenc-bench-c.key
test_key_file "$key_a" 64
head -c 64 /dev/urandom >"$key_b"
head -c 64 /dev/urandom >"$key_c"
hex_of() { od -An -v -tx1 "$1" | tr -d ' \n'; }

# The cases: name old-sector old-key new-sector new-key
cases=("4096-65536 4096 $key_a 65536 $key_b" "key-65536 65536 $key_b 65536 $key_c")
online_runs=1
[ -z "$old_tool" ] || online_runs=2
printf 'REENC-PLAN %s\n' $((${#cases[@]} * reps * 2 + reps * online_runs))
printf 'REENC-INFO kernel_release %s\n' "$(uname -r)"
printf 'REENC-INFO page_size %s\n' "$(page_size)"
printf 'REENC-INFO target crypt=%s\n' "$(target_version crypt)"
printf 'REENC-INFO tool %s\n' "$(lbscrypt --version | head -n 1)"
[ -z "$old_tool" ] || printf 'REENC-INFO old_design %s\n' "$("$old_tool" --version | head -n 1)"
printf 'REENC-INFO volume %s MiB on %s; state on ext4 on %s (brd, %s MiB each)\n' "$mib" "$vol" "$state_dev" "$mib"
printf 'REENC-INFO hotzone %s\n' "${hotzone:-default}"
printf 'REENC-INFO dd bs=1M iflag=direct oflag=direct conv=fsync; reencrypt --force --json\n'

# seconds T0 T1 / rate BYTES SECONDS
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) exit 1; printf "%.3f\n", n / 1048576 / s }'; }

# table SECTOR KEY: a crypt table of the whole volume
table() {
	printf '0 %s crypt aes-xts-plain64 %s 0 %s 0 1 sector_size:%s\n' "$sectors" "$(hex_of "$2")" "$vol" "$1"
}

# stall_run STEP REP TOOL CASE FROM TO: the online case (the header's
# REENC-STALL) run by TOOL, from key file FROM to TO at 65536. The volume holds
# whatever the last conversion left: its bytes are not read.
stall_run() {
	local step=$1 rep=$2 tool=$3 case=$4 from=$5 to=$6
	local name=lbs-rb-live w=/tmp/reenc-stall state=$state_dir/stall.state
	local quarter=$((bytes / 4)) rate=20 fio_pid
	rm -rf "$w"
	mkdir -p "$w"
	lbscrypt -q open --type plain --cipher aes-xts-plain64 --key-size 512 --key-file "$from" \
		--sector-size 65536 "$vol" "$name" || fail "$case rep $rep: lbscrypt open failed"
	# each job's log: completion time (Unix epoch msec), latency (ns), direction, size, offset
	(cd "$w" && exec fio --filename="/dev/mapper/$name" --rw=randwrite --bs=64k --direct=1 \
		--ioengine=psync --rate_iops="$rate" --time_based --runtime=3600 --log_offset=1 \
		--log_unix_epoch=1 \
		--name=far --offset="$((bytes - quarter))" --size="$quarter" --write_lat_log=far \
		--name=all --offset=0 --size="$bytes" --write_lat_log=all >"$w/fio.out" 2>&1) &
	fio_pid=$!
	sleep 3
	local run0=$EPOCHREALTIME
	{ "$tool" -q reencrypt --active-name "$name" --cipher aes-xts-plain64 --key-size 512 \
		--key-file "$from" --sector-size 65536 --new-key-file "$to" --new-sector-size 65536 \
		--force --json --state "$state" ${hotzone:+--hotzone-size "$hotzone"} 2>"$w/reenc.err" ||
		echo "REENC-EXIT $?"; } |
		while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$w/reenc.out"
	sleep 1
	kill -INT "$fio_pid" 2>/dev/null || true
	wait "$fio_pid" || true
	lbscrypt -q close "$name" || fail "$case rep $rep: lbscrypt close failed"
	if grep -q 'REENC-EXIT' "$w/reenc.out" || ! grep -q '"finished": *true' "$w/reenc.out"; then
		cat "$w/reenc.out" "$w/reenc.err"
		fail "$case rep $rep: $tool reencrypt --active-name did not finish"
	fi
	local far all
	far=$(find "$w" -name 'far_lat.*.log' | head -n 1)
	all=$(find "$w" -name 'all_lat.*.log' | head -n 1)
	if [ ! -s "$far" ] || [ ! -s "$all" ]; then
		cat "$w/fio.out"
		fail "$case rep $rep: fio left no latency logs"
	fi
	# progress records: epoch seconds and done_bytes; the run's start first
	awk -v run0="$run0" 'BEGIN { print run0, 0 }
		/"done_bytes"/ && !/"finished"/ {
			if (!match($0, /"done_bytes": *[0-9]+/)) next
			d = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", d); print $1, d
		}' "$w/reenc.out" >"$w/progress"
	local figures
	figures=$(awk -v run0="$run0" -v half=$((bytes / 2)) -v far="$far" -v all="$all" '
		function ms(ns) { return ns / 1000000 }
		FILENAME == ARGV[1] {
			n++; pt[n] = $1; pd[n] = $2
			if (n > 2 && $1 - pt[n - 1] > hz) hz = $1 - pt[n - 1]
			if (halft == "" && $2 >= half) halft = $1
			next
		}
		{
			split($0, f, / *, */)
			done_at = f[1] / 1000; issued = done_at - f[2] / 1e9
			if (FILENAME == far) {
				if (issued < run0) { if (ms(f[2]) > base) base = ms(f[2]) }
				else if (halft != "" && done_at < halft) { nf++; lat[nf] = ms(f[2]); if (lat[nf] > fmax) fmax = lat[nf] }
			} else if (issued >= run0 && ms(f[2]) > amax) amax = ms(f[2])
		}
		END {
			if (nf == 0 || n < 2) { print "none"; exit }
			# p99: the value at rank ceil(0.99 n) of the sorted latencies
			for (i = 2; i <= nf; i++) { v = lat[i]; for (j = i - 1; j >= 1 && lat[j] > v; j--) lat[j + 1] = lat[j]; lat[j + 1] = v }
			r = int(0.99 * nf); if (r < 0.99 * nf) r++
			printf "%.1f %.1f %.1f %d %.1f %.1f %d\n", base, fmax, lat[r], nf, amax, hz * 1000, n - 1
		}' "$w/progress" "$far" "$all")
	[ "$figures" != none ] || {
		cat "$w/progress"
		fail "$case rep $rep: no far write in the run's first half, or fewer than two progress records"
	}
	printf 'REENC-STALL %s %s %s %s\n' "$step" "$case" "$rep" "$figures"
}

step=0
for rep in $(seq 1 "$reps"); do
	for c in "${cases[@]}"; do
		read -r name old_ss old_key new_ss new_key <<<"$c"
		# the dd copy through the two mappings
		step=$((step + 1))
		dmsetup create lbs-rb-old --readonly --table "$(table "$old_ss" "$old_key")" ||
			fail "$name: the old mapping was refused: $(ti_error)"
		dmsetup create lbs-rb-new --table "$(table "$new_ss" "$new_key")" ||
			fail "$name: the new mapping was refused: $(ti_error)"
		t0=$EPOCHREALTIME
		dd if="$(dm_blkdev lbs-rb-old)" of="$(dm_blkdev lbs-rb-new)" bs=1M iflag=direct oflag=direct \
			conv=fsync status=none || fail "$name rep $rep: the dd copy failed"
		t1=$EPOCHREALTIME
		dm_remove lbs-rb-old
		dm_remove lbs-rb-new
		s=$(seconds "$t0" "$t1")
		printf 'REENC-RUN %s %s %s dd %s %s %s -\n' "$step" "$name" "$rep" "$bytes" "$s" "$(rate "$bytes" "$s")"

		# lbscrypt reencrypt of the same conversion
		step=$((step + 1))
		state=$state_dir/bench.state
		args=(--cipher aes-xts-plain64 --key-size 512 --key-file "$old_key" --sector-size "$old_ss"
			--new-key-file "$new_key" --new-sector-size "$new_ss" --force --json --state "$state")
		[ -z "$hotzone" ] || args+=(--hotzone-size "$hotzone")
		t0=$EPOCHREALTIME
		{ lbscrypt -q reencrypt "${args[@]}" "$vol" 2>/tmp/reenc-bench.err || echo "REENC-EXIT $?"; } |
			while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >/tmp/reenc-bench.out
		t1=$EPOCHREALTIME
		if grep -q 'REENC-EXIT' /tmp/reenc-bench.out || ! grep -q '"finished": *true' /tmp/reenc-bench.out; then
			cat /tmp/reenc-bench.out /tmp/reenc-bench.err
			fail "$name rep $rep: lbscrypt reencrypt did not finish"
		fi
		[ ! -e "$state" ] || fail "$name rep $rep: the state file is left after the end"
		s=$(seconds "$t0" "$t1")
		steady=$(awk '/"total_bytes"/ && !/"finished"/ {
			if (!match($0, /"done_bytes": *[0-9]+/)) next
			d = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", d)
			if (n == 0) { t0 = $1; d0 = d }
			t1 = $1; d1 = d; n++
		} END {
			if (n < 2 || t1 <= t0) { print "-"; exit }
			printf "%.3f\n", (d1 - d0) / 1048576 / (t1 - t0)
		}' /tmp/reenc-bench.out)
		printf 'REENC-RUN %s %s %s reencrypt %s %s %s %s\n' "$step" "$name" "$rep" "$bytes" "$s" \
			"$(rate "$bytes" "$s")" "$steady"
	done
	# the online conversion beside two writers (C -> A); the old design's
	# back (A -> C), so that the next repetition starts from key C again
	step=$((step + 1))
	stall_run "$step" "$rep" lbscrypt online-key-65536 "$key_c" "$key_a"
	[ -n "$old_tool" ] || continue
	step=$((step + 1))
	stall_run "$step" "$rep" "$old_tool" online-key-65536-old-design "$key_a" "$key_c"
done
ok "reenc bench: $step steps"
