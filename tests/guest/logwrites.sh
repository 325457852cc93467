#!/usr/bin/env bash
# DESCRIPTION: ext4 on ours comes back clean at every flush of a replayed write log
# BOOT: both
# KERNELS: arm64-64k
#   its bounded form at 65536 (~50-85 s); make harden runs the full sweep
# FULL-KERNELS: all
# LIMIT: 360 ~85 s on arm64-64k; LBS_LOGWRITES_FULL=1 ~1800 s, given its own
# NEEDS: dm-log-writes loop
# ORDER: 200
#
# logwrites.sh: crash-consistent ext4 on ours. The stack:
# ext4 (blocks of the sector size) on a crypt mapping (aes-xts-plain64) on the
# in-tree dm-log-writes, which logs every write that reaches the data device,
# with each flush, FUA and mark, in the order the device made them durable. Ours
# reorders writes in its writer thread; this checks that it keeps every flush
# and FUA promise. Per run: mkfs (before logging), then /lbs/bin/lwload
# (tests/guest/bin/lwload.c: creates, appends, overwrites, truncates, renames,
# deletes, fsyncs; after each fsync a mark naming what the file must hold), then
# /lbs/bin/logreplay (tests/guest/bin/logreplay.c, the log's format read by a
# program written here) replays the log onto a copy of the file system as mkfs
# left it and stops at the points: at each, a copy of the image is opened with
# the same key, mounted (the journal replays), the file of an fsync mark
# checked, unmounted, and e2fsck -fn must
# find nothing. The log replayed to its end must equal the data device. (The
# rig's 64K kernel has no dm-snapshot: each check opens a fresh copy of the
# replay image, so the journal replay of one check is not in the next.)
# Runs: ours at the largest sector size (ext4 -b the same: 65536 on a 64K-page
# kernel), and stock (crypt) at 4096 as the reference. A control: the same log
# replayed with the writes before every second flush lost (a target that broke
# its flush promise), checked at its end, must not come back clean (e2fsck, or
# the files: at the marks after the unmount, all of them are checked against
# what the workload left). Then the torn half (ours, where
# its sector is larger than 4096): at sampled points the writes up to the next
# flush laid torn at 4096-byte boundaries (every other 4 KiB unit new), as a
# device without atomic 64 KiB writes may leave them; whether ext4 comes back
# clean is reported, not judged (it measures ext4, not us). So is what the
# files hold there: each file, block by block (4 KiB), against the state before
# the tear (the point) and the state with the same writes whole (after the
# flush): old, new, mixed (old and new 4 KiB blocks in one file: what a torn
# block lost), with blocks of neither, lost or appeared.
# Bounded by default (LBS_LOGWRITES_OPS operations, 1000; every
# LBS_LOGWRITES_EVERY-th point checked, 25, and the last; tears after every
# LBS_LOGWRITES_TEAR_EVERY-th, 60); LBS_LOGWRITES_FULL=1 runs 3000 operations,
# checks every point and tears after every tenth. Needs `--module both`,
# dm-log-writes and loop devices, and ~1 GiB of memory (a tmpfs of its own).
# Prints a LOGWRITES line per run: points checked, clean, not clean, the first
# failure's output; TORN-POINT lines for the torn half (lwload sums, block by
# block). Measured runs: results/crash-consistency.rst.
# The torn half is skipped (LBS-SKIP) where the sector is 4096: a 4096-byte
# unit cannot tear it.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

replayer=/lbs/bin/logreplay load=/lbs/bin/lwload
for p in "$replayer" "$load"; do
	[ -x "$p" ] || fail "no $p (qemu/lib/guest-bin builds tests/guest/bin)"
done
modprobe dm-log-writes 2>/dev/null || true
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop devices for the images"
modprobe ext4 2>/dev/null || true
for t in log-writes crypt crypt_lbs; do
	grep -qw "^$t" <(dmsetup targets) || fail "no $t target (needs --module both and dm-log-writes)"
done

full=${LBS_LOGWRITES_FULL:-0}
ops=${LBS_LOGWRITES_OPS:-1000}
every=${LBS_LOGWRITES_EVERY:-25}
tear_every=${LBS_LOGWRITES_TEAR_EVERY:-60}
if [ "$full" = 1 ]; then
	ops=3000 every=1 tear_every=10
fi
seed=24
fs_mb=160	# ext4 with 64 KiB blocks needs 1024 journal blocks: 64 MiB of journal
len=$((fs_mb << 11))
key=$(test_key 64)
w=/tmp/lw
mnt=/mnt/lbs-lw
declare -A fsynced=()
mkdir -p "$w" "$mnt"
# a tmpfs of its own: the images and the log take more than half the memory
mount -t tmpfs -o size=1100M lbs-lw "$w" || fail "no tmpfs for the images at $w"
on_exit umount "$w"
on_exit dm_remove lbs-lw-chk
on_exit dm_remove lbs-lw-log
on_exit dm_remove lbs-lw-crypt
on_exit umount "$mnt"
on_exit losetup -D

# table TARGET SS DEV: a crypt table over DEV
table() {
	printf '0 %s %s aes-xts-plain64 %s 0 %s 0 2 sector_size:%s iv_large_sectors' "$len" "$1" "$key" "$3" "$2"
}

# tree_sum: the sha256 of every file's name and contents under $mnt
tree_sum() {
	(cd "$mnt" && find . -type f -print0 2>/dev/null | sort -z | xargs -0r sha256sum | sha256sum)
}

# check_image TARGET SS CHECK-LOOP WHAT [MARK [SUMS]]: copy the replay image to
# the check image (CHECK-LOOP's file), open it with TARGET at SS, mount it, check
# the file an fsync mark names, list the files' sums in SUMS (lwload sums; none
# when it does not mount), unmount, e2fsck -fn. Sets problem to what was wrong
# ("" when clean).
check_image() {
	local target=$1 ss=$2 loop=$3 what=$4 m=${5:--} sums=${6:-} dev rc=0
	problem=""
	[ -z "$sums" ] || rm -f "$sums"
	cp "$w/replay.img" "$w/check.img"
	dmsetup create lbs-lw-chk --table "$(table "$target" "$ss" "$loop")" ||
		fail "$what: the crypt mapping over the check image was refused: $(ti_error)"
	dev=/dev/mapper/lbs-lw-chk
	if ! mount -t ext4 "$dev" "$mnt" 2>"$w/mount.err"; then
		problem="mount failed: $(tr '\n' ' ' <"$w/mount.err") $(dmesg | tail -n 4 | tr '\n' ' ')"
	else
		if [ -n "${fsynced[$m]:-}" ]; then
			# shellcheck disable=SC2086 # path size hash
			set -- ${fsynced[$m]}
			out=$("$load" verify "$mnt/$1" "$2" "$3") || problem="the file fsynced before mark $m: $out"
		fi
		case $m in
		unmounted | dm-log-writes-end)
			[ "$(tree_sum)" = "$final_tree" ] ||
				problem+="${problem:+; }the files differ from those the workload left" ;;
		esac
		[ -z "$sums" ] || "$load" sums "$mnt" >"$sums" || problem+="${problem:+; }the files do not all read"
		umount "$mnt"
		e2fsck -fn "$dev" >"$w/fsck.log" 2>&1 || rc=$?
		[ "$rc" = 0 ] || problem+="${problem:+; }e2fsck -fn exit $rc: $(grep -v '^Pass\|^e2fsck\|^Warning: skipping journal' "$w/fsck.log" | head -n 12 | tr '\n' '|')"
	fi
	dmsetup remove lbs-lw-chk || fail "$what: the check's mapping did not go"
}

# compare_files BEFORE AFTER TORN: the files of a torn state (lwload sums
# listings) against the states before and after it; prints two lines: the
# counts of files mixed (4 KiB blocks of both), with blocks of neither, lost (in
# both states, not here) and appeared (in neither); then, to be read, those with
# the files that read old and new, the blocks of the mixed ones and the first
# few such files by name
compare_files() {
	awk '
		FILENAME == ARGV[1] { before[$1] = $0; next }
		FILENAME == ARGV[2] { after[$1] = $0; next }
		{ torn[$1] = $0 }
		function same(x, y) { return split(x, p) >= 3 && split(y, q) >= 3 && p[2] == q[2] && p[3] == q[3] }
		function note(f, what) { if (shown++ < 4) names = names " " f " (" what ")" }
		END {
			for (f in torn) {
				if ((f in before && same(torn[f], before[f])) || (!(f in before) && !(f in after))) {
					if (f in before) old++; else { appeared++; note(f, "appeared") }
					continue
				}
				if (f in after && same(torn[f], after[f])) { new++; continue }
				n = split(torn[f], t); split(f in before ? before[f] : "", b); split(f in after ? after[f] : "", a)
				ko = kn = kx = 0
				for (i = 4; i <= n; i++) {
					if (t[i] == b[i]) ko++
					else if (t[i] == a[i]) kn++
					else kx++
				}
				if (kx) { neither++; kxs += kx; note(f, kx " of " n - 3 " blocks neither") }
				else { mixed++; mo += ko; mn += kn; note(f, ko " blocks old, " kn " new") }
			}
			for (f in before)
				if (f in after && !(f in torn)) { lost++; note(f, "lost") }
			printf "%d %d %d %d\n", mixed, neither, lost, appeared
			printf "%d old, %d new, %d mixed (%d blocks old, %d new), %d with blocks of neither (%d blocks), %d lost, %d appeared%s\n",
				old, new, mixed, mo, mn, neither, kxs, lost, appeared, names ? ":" names : ""
		}' "$1" "$2" "$3"
}

# replay TARGET SS LABEL OPTION...: replay the log onto a fresh copy of the base
# image and check it at the points the replayer stops at (its options), and at
# each torn state where tear= is given (with whole: the files compared with the
# states before and after). Sets n_checked n_clean n_bad first_bad, and for
# tears t_checked t_clean, the TORN-POINT lines in $w/torn.txt and the files'
# totals in t_files (mixed, neither, lost, appeared, states compared).
replay() {
	local target=$1 ss=$2 label=$3 loop kind a b c d pid t_start files sums=""
	local f_mixed f_neither f_lost f_appeared
	shift 3
	[[ " $* " != *" whole "* ]] || sums=$w/before.sums
	cp "$w/base.img" "$w/replay.img"
	cp "$w/base.img" "$w/check.img"
	loop=$(losetup -f --show "$w/check.img")
	n_checked=0 n_clean=0 n_bad=0 first_bad="" t_checked=0 t_clean=0 ended=0 t_start=$SECONDS
	t_files=(0 0 0 0 0)
	: >"$w/torn.txt"
	coproc RP { "$replayer" replay "$w/log.img" "$w/replay.img" "$@"; }
	pid=$RP_PID
	while read -r -u "${RP[0]}" kind a b c d; do
		case $kind in
		POINT)
			check_image "$target" "$ss" "$loop" "$label point $a (entry $b, $c $d)" "$d" "$sums"
			n_checked=$((n_checked + 1))
			if [ -z "$problem" ]; then
				n_clean=$((n_clean + 1))
			else
				n_bad=$((n_bad + 1))
				[ -n "$first_bad" ] || first_bad="point $a (entry $b, flags $c, mark $d): $problem"
			fi
			[ $((n_checked % 100)) != 0 ] ||
				printf '   %s: %s points checked, %s clean (%s s)\n' "$label" "$n_checked" "$n_clean" $((SECONDS - t_start))
			;;
		WHOLE)
			check_image "$target" "$ss" "$loop" "$label point $a's writes whole" - "$w/after.sums"
			;;
		TORN)
			check_image "$target" "$ss" "$loop" "$label torn after point $a" - "${sums:+$w/torn.sums}"
			t_checked=$((t_checked + 1))
			[ -n "$problem" ] || t_clean=$((t_clean + 1))
			files=""
			if [ -n "$sums" ]; then
				if [ -f "$w/before.sums" ] && [ -f "$w/after.sums" ] && [ -f "$w/torn.sums" ]; then
					{
						read -r f_mixed f_neither f_lost f_appeared
						read -r files
					} < <(compare_files "$w/before.sums" "$w/after.sums" "$w/torn.sums")
					t_files=($((t_files[0] + f_mixed)) $((t_files[1] + f_neither)) $((t_files[2] + f_lost))
						$((t_files[3] + f_appeared)) $((t_files[4] + 1)))
					files="; files: $files"
				else
					files="; files: not compared (a state did not mount)"
				fi
			fi
			printf 'TORN-POINT %s point %s: %s writes, %s torn, %s 4K units left old: %s%s\n' \
				"$label" "$a" "$b" "$c" "$d" "${problem:-clean}" "$files" >>"$w/torn.txt"
			;;
		END)
			ended=1
			break
			;;
		*) fail "$label: the replayer said: $kind $a $b $c $d" ;;
		esac
		echo go >&"${RP[1]}"
	done
	wait "$pid" || fail "$label: the replayer failed (exit $?)"
	[ "$ended" = 1 ] || fail "$label: the replayer stopped before the end of the log"
	losetup -d "$loop"
}

# run TARGET SS: mkfs, the workload over dm-log-writes, then the replay
run() {
	local target=$1 ss=$2 label="$1 ss=$2" data logdev t0 n
	t0=$SECONDS
	rm -f "$w"/*.img
	truncate -s "${fs_mb}M" "$w/data.img"
	truncate -s 1200M "$w/log.img"
	data=$(losetup -f --show "$w/data.img")
	logdev=$(losetup -f --show "$w/log.img")
	dmsetup create lbs-lw-crypt --table "$(table "$target" "$ss" "$data")" || fail "$label: refused: $(ti_error)"
	mkfs.ext4 -q -F -b "$ss" -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$(dm_blkdev lbs-lw-crypt)" >"$w/mkfs.log" 2>&1 ||
		fail "$label: mkfs.ext4 -b $ss failed: $(cat "$w/mkfs.log")"
	dmsetup remove lbs-lw-crypt
	cp "$w/data.img" "$w/base.img"
	dmsetup create lbs-lw-log --table "0 $len log-writes $data $logdev" || fail "$label: log-writes refused: $(ti_error)"
	dmsetup create lbs-lw-crypt --table "$(table "$target" "$ss" /dev/mapper/lbs-lw-log)" || fail "$label: refused over log-writes: $(ti_error)"
	mount -t ext4 "$(dm_blkdev lbs-lw-crypt)" "$mnt" || fail "$label: mount failed: $(dmesg | tail -n 3)"
	"$load" run "$mnt" "$ops" "$seed" lbs-lw-log >"$w/load.txt" || fail "$label: the workload failed: $(tail -n 3 "$w/load.txt")"
	final_tree=$(tree_sum)
	umount "$mnt"
	dmsetup message lbs-lw-log 0 mark unmounted
	! dmsetup status lbs-lw-log | grep -q logging_disabled ||
		fail "$label: dm-log-writes stopped logging (its log device too small?): $(dmsetup status lbs-lw-log)"
	dmsetup remove lbs-lw-crypt
	dmsetup remove lbs-lw-log
	losetup -d "$data" "$logdev"
	data_sum=$(sha256sum <"$w/data.img")
	rm "$w/data.img"
	fsynced=()
	while read -r _ m path size hash; do
		fsynced[$m]="$path $size $hash"
	done < <(grep '^FSYNC ' "$w/load.txt")
	log_line=$("$replayer" list "$w/log.img") || fail "$label: the log does not read: $log_line"
	printf '   %s: %s\n   %s: %s (%s s)\n' "$label" "$(grep '^LOAD ' "$w/load.txt")" "$label" "$log_line" $((SECONDS - t0))
	n=$(awk '{ print $7 + $9 }' <<<"$log_line")
	[ "$n" -ge 100 ] || fail "$label: only $n flushes and FUA writes in the log: the workload did not exercise them"
	t0=$SECONDS
	replay "$target" "$ss" "$label" "every=$every"
	[ "$(sha256sum <"$w/replay.img")" = "$data_sum" ] ||
		fail "$label: the log replayed to its end differs from the data device (the replayer or the log is wrong)"
	ok "$label: the log replayed to its end equals the data device"
	printf 'LOGWRITES %s: points checked %s, clean %s, not clean %s (every %s of the log'"'"'s points and the last; %s fsync marks with files to check; %s s)\n' \
		"$label" "$n_checked" "$n_clean" "$n_bad" "$every" "${#fsynced[@]}" $((SECONDS - t0))
	[ "$n_bad" = 0 ] || fail "$label: $n_bad of $n_checked points did not come back clean; the first: $first_bad"
	ok "$label: ext4 came back clean at $n_checked points (mounted, fsynced files as fsynced, e2fsck -fn clean)"
}

# control TARGET SS: the last log replayed with the writes before every second
# flush lost, checked at its last point only: it must not come back clean
control() {
	local label="$1 ss=$2 control"
	replay "$1" "$2" "$label" drop=2 every=1000000000
	printf 'LOGWRITES %s: writes before every second flush lost: %s\n' "$label" "${first_bad:-clean}"
	[ "$n_bad" -ge 1 ] || fail "$label: losing the writes before every second flush went unseen: the check cannot fail"
	ok "$label: the check fails where flushed writes are lost"
}

# torn TARGET SS: tears at every $tear_every-th point, reported
torn() {
	local label="$1 ss=$2 torn" t0=$SECONDS
	replay "$1" "$2" "$label" "every=$tear_every" tear=4096 whole
	cat "$w/torn.txt"
	printf 'LOGWRITES %s: torn after %s points (every %s), ext4 clean after %s, not clean after %s (%s s; measures ext4, not a failure)\n' \
		"$label" "$t_checked" "$tear_every" "$t_clean" $((t_checked - t_clean)) $((SECONDS - t0))
	printf 'LOGWRITES %s: files compared in %s torn states: %s mixed (old and new 4 KiB blocks), %s with blocks of neither, %s lost, %s appeared\n' \
		"$label" "${t_files[4]}" "${t_files[0]}" "${t_files[1]}" "${t_files[2]}" "${t_files[3]}"
	ok "$label: $t_checked torn states checked"
}

big=$(bound)
run crypt_lbs "$big"
control crypt_lbs "$big"
if [ "$big" -gt 4096 ]; then
	torn crypt_lbs "$big"
else
	printf 'LBS-SKIP logwrites: the torn half: the sector here is %s, which a 4096-byte unit cannot tear\n' "$big"
fi
run crypt 4096
