#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt online under a mounted ext4 (512->4096, 4096->65536, a new key at 65536), cut at every flush and FUA: fsync'd records intact, e2fsck clean
# BOOT: lbscrypt
# KERNELS: none
#   tens of minutes of a 64K guest: make check-full runs it, make check's
#   power-cut share goes to reencrypt-cuts (offline)
# FULL-KERNELS: page>16384
# LIMIT: 3600 three logged online runs (two of 136 MiB), each cut at every flush and FUA and resumed
# NEEDS: tool dm-log-writes loop
# ORDER: 337
#
# reencrypt-online-cuts.sh: an online `lbscrypt reencrypt --active-name`
# survives a power cut at every point that matters, with the filesystem
# mounted and written to. The volume and the state filesystem (ext4, the
# hotzone's size and 8 MiB) are two dm-linear slices (lbs-rc-data,
# lbs-rc-state) of ONE dm-log-writes device, so one log orders every write of
# both. The volume is opened with its old parameters (`lbscrypt open`, as
# lbs-rc-vol), holds an ext4 made on it, and is mounted; while two writers go
# on, the run converts it without unmounting. Three conversions, each with a
# new key: 512 -> 4096 (16 MiB, ext4 with 4096-byte blocks, hotzones of
# 4 MiB); 4096 -> 65536 and 65536 -> 65536 (136 MiB: the smallest 64K-block
# ext4 that mkfs gives a journal, whose least is 1024 blocks; hotzones of
# 32 MiB). The writers:
# - a checked writer appends 4096-byte records (each different, from
#   /dev/urandom) to a file, fsync()s each, and after each fsync has returned
#   puts a mark "rec-N" into the log (dmsetup message ... mark): at any cut
#   after that mark, records 1..N were durable and must read back;
# - fio, O_DIRECT 64 KiB random writes with crc32c verify (a pass writes, then
#   verifies), rate-limited, as load; its passes must all verify.
# The writers start before the run and stop after it; after the run the
# mapping must be one crypt line with the new sector size and key.
# Then the log is replayed (/lbs/bin/logreplay) onto a copy of the slices as
# they were, and at each cut point a copy of the image is checked as a machine
# would find it after the power came back: the state filesystem mounted (its
# journal replays); when the state file is there, `lbscrypt reencrypt
# --resume` with both keys, offline (the mapping is gone, and the state's
# device path, a dm-N, may name another mapping now: the run's device is found
# by its UUID); then the volume opened with the new parameters (before the
# state file existed: the old ones), its ext4 mounted (its journal replays),
# the records up to the last mark before the cut compared, unmounted, and
# e2fsck -fn must be clean.
# The cut points: every flush and FUA of the log, and a seeded sample of the
# other writes (LBS_REENC_CUTS_SAMPLE, 4 by default; the seed printed,
# LBS_REENC_CUTS_SEED gives it); a point with no write since the last one
# checked leaves that image, and is counted, not checked again.
# LBS_REENC_ONLINE_CUTS_EVERY=K checks only every K-th of those, to look at the
# test quickly: the summary then says how many it left out.
# LBS_REENC_ONLINE_CUTS_CONVERSIONS (words of 512-4096 4096-65536 65536, all
# by default) picks conversions.
# A control shows the check can fail: the 512 -> 4096 log replayed with the
# writes of the journal's first block (the "journaled" record) lost, checked
# at the flushes after the volume's writes, must NOT resume to a clean
# filesystem with its records somewhere.
# No torn states: a torn 64 KiB write of the filesystem's own can damage ext4
# whatever the tool does (logwrites.sh measures that); reencrypt-cuts.sh
# tears the tool's own writes.
# The guest needs about 900 MiB of tmpfs for the log and the images (the
# default 1536 MiB guest has it).
# Prints REENC-ONLINE-CUTS lines: each logged run (records, fio passes, the
# log's counts), the points checked by phase and the records compared, the
# control, a total. Measured runs: results/make-check.md.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"
# shellcheck source=tests/guest/common/reencrypt-replay.sh
. "$(dirname "$0")/common/reencrypt-replay.sh"

cuts_ready
command -v fio >/dev/null || fail "no fio in the guest"
[ "$(page_size)" = 65536 ] || fail "this test needs a 64K-page kernel, the page is $(page_size)"

full=0
sample=${LBS_REENC_CUTS_SAMPLE:-4}
seed=${LBS_REENC_CUTS_SEED:-$(($(date +%s) % 100000))}
every=${LBS_REENC_ONLINE_CUTS_EVERY:-1}
case $every in '' | *[!0-9]* | 0) fail "LBS_REENC_ONLINE_CUTS_EVERY must be a number of 1 or more, not '$every'" ;; esac
iterations=1000
printf 'REENC-ONLINE-CUTS seed %s (LBS_REENC_CUTS_SEED=%s repeats this run), every %s\n' "$seed" "$seed" "$every"
RANDOM=$seed

vmnt=/mnt/lbs-rc-vol
avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
[ "$avail" -ge 1000 ] || fail "the guest has $avail MiB available; the log and the images need about 900 MiB of tmpfs (qemu/run --mem)"
cuts_workspace /tmp/lbs-roc 960M
mkdir -p "$vmnt"
on_exit dm_remove lbs-rc-vol
on_exit umount "$vmnt"
on_exit stop_writers
records_max=400
head -c $((records_max * 4096)) /dev/urandom >"$w/records.all"

# reenc_resume STATE: --resume, offline, with both keys (resume_cut)
reenc_resume() {
	lbscrypt -q reencrypt --resume --state "$1" --key-file "$c_old_key" --new-key-file "$c_new_key"
}
# open_vol SS KEYFILE DEV NAME: the volume over DEV opened as NAME
open_vol() {
	lbscrypt -q open --cipher aes-xts-plain64 --key-size 512 --key-file "$2" --sector-size "$1" \
		--size "$data_sec" "$3" "$4" >/dev/null
}

# The conversion being tested: its label, sides, keys, the volume's size, its
# ext4's block size and the hotzone's size (set by convert).
c_label="" c_old=0 c_new=0 c_old_key="" c_new_key="" c_block=0 hotzone=0

# make_base: base.img (sparse), the volume at the old sector size and key
# holding an ext4 (c_block) with a journal, and the state filesystem
make_base() {
	base_start
	open_vol "$c_old" "$c_old_key" /dev/mapper/lbs-rc-data lbs-rc-chk || fail "$c_label: lbscrypt open at $c_old failed"
	# the journal not zeroed: its blocks are written by use (a sparse image)
	mkfs.ext4 -q -F -b "$c_block" -E nodiscard,lazy_itable_init=0,lazy_journal_init=1 /dev/mapper/lbs-rc-chk >"$w/mkfs.log" 2>&1 ||
		fail "$c_label: mkfs.ext4 -b $c_block on the $c_old volume failed: $(cat "$w/mkfs.log")"
	dumpe2fs -h /dev/mapper/lbs-rc-chk 2>/dev/null | grep -q has_journal ||
		fail "$c_label: mkfs.ext4 gave the $data_bytes-byte volume no journal: a cut's check needs one"
	dm_remove lbs-rc-chk
	base_end
}

# writer: the checked writer (see the header); records its count in
# writer.n, a failure in writer.failed; stops at writers.stop
writer() {
	local n=0
	while [ ! -e "$w/writers.stop" ] && [ "$n" -lt "$records_max" ]; do
		n=$((n + 1))
		if ! dd if="$w/records.all" of="$vmnt/records" bs=4096 skip=$((n - 1)) seek=$((n - 1)) count=1 \
			conv=notrunc,fsync status=none 2>"$w/writer.err"; then
			echo "record $n: $(cat "$w/writer.err")" >"$w/writer.failed"
			return
		fi
		if ! dmsetup message lbs-rc-log 0 mark "rec-$n" 2>"$w/writer.err"; then
			echo "mark $n: $(cat "$w/writer.err")" >"$w/writer.failed"
			return
		fi
		echo "$n" >"$w/writer.n"
		sleep 0.5
	done
}
# fio_loop: fio's passes until writers.stop; counts them in fio.passes, a
# failed one's log in fio.failed
fio_loop() {
	local n=0
	while [ ! -e "$w/writers.stop" ]; do
		n=$((n + 1))
		if ! fio_ok "$w/fio.$n.log" --name=direct --filename="$vmnt/fio-direct" --ioengine=psync \
			--rw=randwrite --bs=64k --direct=1 --size=2m --rate=1m --randrepeat=0 \
			--verify=crc32c --verify_fatal=1; then
			cp "$w/fio.$n.log" "$w/fio.failed"
			return
		fi
		echo "$n" >"$w/fio.passes"
	done
}
# stop_writers: both writers told to stop, and waited for
writer_pids=()
stop_writers() {
	touch "$w/writers.stop"
	[ "${#writer_pids[@]}" = 0 ] || wait "${writer_pids[@]}" || true
	writer_pids=()
}
# wait_records N: until the writer has made N records (or failed)
wait_records() {
	for _ in $(seq 1200); do
		[ ! -e "$w/writer.failed" ] || fail "the checked writer failed: $(cat "$w/writer.failed")"
		[ "$(cat "$w/writer.n" 2>/dev/null || echo 0)" -lt "$1" ] || return 0
		sleep 0.1
	done
	fail "the checked writer did not reach $1 records in 120 s"
}

# logged_run: the online run over dm-log-writes, the writers beside it; leaves
# log.img, and the entries of the log in entries.txt
logged_run() {
	local out t0=$SECONDS tbl
	log_start 700M
	open_vol "$c_old" "$c_old_key" /dev/mapper/lbs-rc-data lbs-rc-vol || fail "$c_label: lbscrypt open of the volume failed"
	mount -t ext4 /dev/mapper/lbs-rc-vol "$vmnt" || fail "$c_label: the ext4 does not mount: $(dmesg | tail -n 3)"
	rm -f "$w/writers.stop" "$w/writer.n" "$w/writer.failed" "$w/fio.passes" "$w/fio.failed"
	writer &
	writer_pids=($!)
	fio_loop &
	writer_pids+=($!)
	wait_records 3
	# fio's direct writes are 64 KiB at 64 KiB boundaries, aligned to every new
	# sector size here; it may hold its file open at the run's check, so --force
	# (the O_DIRECT refusal itself is reencrypt-online-refusals')
	out=$(lbscrypt -q reencrypt --active-name lbs-rc-vol --cipher aes-xts-plain64 --key-size 512 \
		--sector-size "$c_old" --key-file "$c_old_key" --new-key-file "$c_new_key" --new-sector-size "$c_new" \
		--hotzone-size "$hotzone" --pbkdf-force-iterations "$iterations" --state "$smnt/run.state" --force 2>&1) ||
		fail "$c_label: the logged online run failed: $out"
	records_at_end=$(cat "$w/writer.n")
	wait_records $((records_at_end + 3))
	stop_writers
	[ ! -e "$w/writer.failed" ] || fail "the checked writer failed: $(cat "$w/writer.failed")"
	[ ! -e "$w/fio.failed" ] || fail "a fio pass beside the run failed: $(grep -iE 'verify|err' "$w/fio.failed" | head -n 3)"
	n_records=$(cat "$w/writer.n")
	n_fio=$(cat "$w/fio.passes" 2>/dev/null || echo 0)
	[ "$n_fio" -ge 1 ] || fail "no fio pass completed beside the run"
	tbl=$(dmsetup table --showkeys lbs-rc-vol)
	{ [ "$(grep -c . <<<"$tbl")" = 1 ] && [[ $tbl == *" crypt aes-xts-plain64 ${key_hex[$c_new_key]} "* ]] &&
		{ [ "$c_new" = 512 ] || [[ $tbl == *" sector_size:$c_new"* ]]; }; } ||
		fail "$c_label: after the run lbs-rc-vol is not one crypt line at $c_new with the new key: ${tbl//${key_hex[$c_new_key]}/KEY-NEW}"
	cmp -n $((n_records * 4096)) "$w/records.all" "$vmnt/records" ||
		fail "$c_label: the records read back wrong on the live mapping after the run"
	umount "$vmnt"
	dm_remove lbs-rc-vol
	log_end
	# the marks: entry and record count, in order
	mark_entry=() mark_n=()
	while read -r e n; do
		mark_entry+=("$e") mark_n+=("$n")
	done < <(awk '$1 == "ENTRY" && $6 ~ /^rec-[0-9]+$/ { sub(/^rec-/, "", $6); print $2, $6 }' "$w/entries.txt")
	[ "${#mark_n[@]}" = "$n_records" ] || fail "the log has ${#mark_n[@]} record marks, the writer made $n_records"
	printf '   the logged run took %s s: %s records (%s during the run), %s fio passes; %s\n' \
		$((SECONDS - t0)) "$n_records" "$records_at_end" "$n_fio" "$log_line"
}

# records_before ENTRY: durable, the records fsync()ed before the log's ENTRY
records_before() {
	local i
	durable=0
	for ((i = 0; i < ${#mark_entry[@]}; i++)); do
		[ "${mark_entry[$i]}" -le "$1" ] || break
		durable=${mark_n[$i]}
	done
}

# check_image: copy the replay image into work.img (the check's stack, check_stack),
# resume when the state file is there (resume_cut), open the volume with the
# parameters of its side, mount, compare the durable records, e2fsck; sets
# problem and kind
check_image() {
	local side key rc=0 size
	cp "$w/replay.img" "$w/work.img"
	slices /dev/mapper/lbs-rc-log
	resume_cut
	side=$c_new key=$c_new_key
	[ "$kind" != before ] || side=$c_old key=$c_old_key
	records_before "$cut_entry"
	if ! open_vol "$side" "$key" /dev/mapper/lbs-rc-data lbs-rc-chk 2>"$w/open.err"; then
		problem+="${problem:+; }lbscrypt open with the ${kind:-?} parameters ($side) failed: $(cat "$w/open.err")"
	elif ! mount -t ext4 /dev/mapper/lbs-rc-chk "$vmnt" 2>"$w/mount.err"; then
		problem+="${problem:+; }the volume's ext4 read with the ${kind:-?} parameters ($side) does not mount: $(tr '\n' ' ' <"$w/mount.err")"
	else
		# before the first record's mark the file may not be there at all
		size=$(stat -c %s "$vmnt/records" 2>/dev/null || echo 0)
		if [ "$size" -lt $((durable * 4096)) ]; then
			problem+="${problem:+; }the records file has $size bytes, $durable records were fsync()ed before the cut"
		elif [ "$durable" -gt 0 ] && ! cmp -s -n $((durable * 4096)) "$w/records.all" "$vmnt/records"; then
			problem+="${problem:+; }the first $durable records (fsync()ed before the cut) read back wrong: $(cmp -n $((durable * 4096)) "$w/records.all" "$vmnt/records" 2>&1 | head -n 1 || true)"
		fi
		umount "$vmnt"
		e2fsck -fn /dev/mapper/lbs-rc-chk >"$w/fsck.log" 2>&1 || rc=$?
		[ "$rc" = 0 ] || problem+="${problem:+; }e2fsck -fn exit $rc: $(grep -v '^Pass\|^e2fsck' "$w/fsck.log" | head -n 6 | tr '\n' '|' || true)"
	fi
	dm_remove lbs-rc-chk
	dmsetup remove lbs-rc-data lbs-rc-state || fail "the check's mappings did not go: $(dmsetup ls)"
	checked_records=$((checked_records + durable))
}

total_checked=0 total_same=0 n_convert=0
# convert LABEL OLD NEW OLDKEY NEWKEY MIB BLOCK HOTZONE-MIB: the logged run of
# a conversion (the volume MIB MiB holding an ext4 with BLOCK-byte blocks,
# the state filesystem the hotzone's size and 8 MiB) and its replay
convert() {
	local counts f u s np same left_out
	c_label=$1 c_old=$2 c_new=$3 c_old_key=$4 c_new_key=$5 c_block=$7 hotzone=$(($8 << 20))
	data_bytes=$(($6 << 20)) state_bytes=$((($8 + 8) << 20))
	data_sec=$((data_bytes / 512)) state_sec=$((state_bytes / 512))
	n_convert=$((n_convert + 1)) journal_block="" seen_state=0 checked_records=0
	make_base
	logged_run
	counts=$(points_selected "$n_convert" 2>&1 >"$w/points.all")
	read -r f u s np same <<<"$counts"
	[ $((f + u)) -ge 20 ] || fail "$c_label: only $f flushes and $u FUA writes in the log: the run and the writers did not go through it"
	awk -v k="$every" 'NR % k == 0' "$w/points.all" >"$w/points.sel"
	left_out=$(($(grep -c . "$w/points.all") - $(grep -c . "$w/points.sel")))
	total_left_out=$((total_left_out + left_out))
	replay_check "$c_label" "$w/points.sel" each
	[ "$(sha256sum <"$w/replay.img")" = "$work_sum" ] ||
		fail "$c_label: the log replayed to its end differs from the logged device (the replayer or the log is wrong)"
	printf 'REENC-ONLINE-CUTS %s: cut points checked %s (flushes %s, FUA %s, sampled %s of %s other writes; %s more leave the image of one checked; %s left out by LBS_REENC_ONLINE_CUTS_EVERY=%s), resumed to a clean ext4 with its durable records %s: before the run %s, resumed %s, after the run %s; %s records compared (%s s)\n' \
		"$c_label" "$n_checked" "$f" "$u" "$s" "$np" "$same" "$left_out" "$every" "$n_same" "$n_before" "$n_resumed" "$n_after" "$checked_records" "$replay_secs"
	total_checked=$((total_checked + n_checked)) total_same=$((total_same + n_same))
	[ "$n_same" = "$n_checked" ] || fail "$c_label: $((n_checked - n_same)) of $n_checked cut points did not resume to a clean ext4 with its records; the first: $first_bad"
	{ [ "$n_before" -ge 1 ] && [ "$n_resumed" -ge 5 ] && [ "$n_after" -ge 1 ]; } ||
		fail "$c_label: the cut points checked missed a phase (before the run $n_before, resumed $n_resumed, after $n_after)"
	ok "$c_label: every cut point checked resumes to a clean ext4 with its fsync()ed records ($n_checked)"
}

t_all=$SECONDS
controls_failed=0 total_left_out=0
# LBS_REENC_ONLINE_CUTS_CONVERSIONS: which conversions run (all three by
# default; the control follows "512-4096", the cheapest)
conversions=" ${LBS_REENC_ONLINE_CUTS_CONVERSIONS:-512-4096 4096-65536 65536} "
for c in $conversions; do
	case $c in 512-4096 | 4096-65536 | 65536) ;; *) fail "LBS_REENC_ONLINE_CUTS_CONVERSIONS: no conversion '$c' (512-4096, 4096-65536, 65536)" ;; esac
done
if [[ $conversions == *" 512-4096 "* ]]; then
	# ext4 with 4096-byte blocks takes a journal from 8 MiB on
	convert "512->4096 online new key" 512 4096 "$key_a" "$key_b" 16 4096 4
	journal_control REENC-ONLINE-CUTS "a clean ext4 and its records"
fi
# the smallest 64K-block ext4 that mkfs.ext4 gives a journal (1024 blocks at least)
[[ $conversions != *" 4096-65536 "* ]] || convert "4096->65536 online new key" 4096 65536 "$key_a" "$key_b" 136 65536 32
[[ $conversions != *" 65536 "* ]] || convert "65536 online new key" 65536 65536 "$key_b" "$key_a" 136 65536 32

printf 'REENC-ONLINE-CUTS total: %s states checked, %s clean with their records; controls failed as they must: %s; seed %s; %s s\n' \
	"$total_checked" "$total_same" "$controls_failed" "$seed" $((SECONDS - t_all))
[ "$every" = 1 ] || printf 'REENC-ONLINE-CUTS not the whole check: LBS_REENC_ONLINE_CUTS_EVERY=%s left %s cut points out\n' "$every" "$total_left_out"
