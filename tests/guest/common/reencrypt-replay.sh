# shellcheck shell=bash
# DESCRIPTION: what the power-cut tests of lbscrypt reencrypt share (sourced after lib.sh)
#
# The variables it reads are the caller's, and those it sets are the caller's to read:
# shellcheck disable=SC2154,SC2034
# reencrypt-replay.sh: what the power-cut tests of `lbscrypt reencrypt`
# (reencrypt-cuts.sh offline, reencrypt-online-cuts.sh online) share: the two
# slices of one logged device, the replay of the log with a check at chosen
# stops, the choice of those stops, and the resume at a cut. Not a test (no
# LIMIT line): source it after lib.sh, then call cuts_ready and
# cuts_workspace. The caller sets data_sec, state_sec, data_bytes (the
# slices' sizes), c_label (the conversion, in failures), full, sample and
# seed, and defines check_image (the check at a stop: sets problem, "" when
# clean, and kind) and reenc_resume STATE. The mappings are lbs-rc-log (the
# logged device), lbs-rc-data and lbs-rc-state (its slices) and lbs-rc-chk
# (a check's).

# cuts_ready: what the tests need in the guest, or fail saying what is missing
replayer=/lbs/bin/logreplay
cuts_ready() {
	[ -x "$replayer" ] || fail "no $replayer (qemu/lib/guest-bin builds tests/guest/bin)"
	command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
	[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
	modprobe dm-log-writes 2>/dev/null || true
	grep -qw '^log-writes' <(dmsetup targets) || fail "no log-writes target (dm-log-writes does not load)"
	[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop devices for the images"
}

# cuts_workspace DIR SIZE: a tmpfs of SIZE at DIR (w) for the images and the
# log (base.img, work.img, replay.img, log.img, entries.txt), the state
# filesystem's mount point smnt, the registry (empty, or fail), the cleanups,
# and two keys key_a and key_b (64 bytes) with their hex in key_hex
smnt=/mnt/lbs-rc-state
registry=/etc/lbscrypt/reencrypt
cuts_workspace() {
	local k
	w=$1
	mkdir -p "$w" "$smnt"
	mount -t tmpfs -o size="$2" lbs-rc "$w" || fail "no tmpfs of $2 for the images at $w"
	on_exit umount "$w"
	on_exit losetup -D
	on_exit dm_remove lbs-rc-log
	on_exit dm_remove lbs-rc-data
	on_exit dm_remove lbs-rc-state
	on_exit dm_remove lbs-rc-chk
	on_exit umount "$smnt"
	on_exit rm -rf "$registry"
	on_exit private_left
	[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "the guest's registry $registry is not empty: $(ls "$registry")"
	key_a=$w/a.key key_b=$w/b.key
	test_key_file "$key_a" 64
	head -c 64 /dev/urandom >"$key_b"
	declare -gA key_hex=()
	for k in "$key_a" "$key_b"; do
		key_hex[$k]=$(od -An -v -tx1 "$k" | tr -d ' \n')
	done
}

# The run's device is lbs-rc-data, and --resume checks what it is built on
# (its dm uuid, and recursively the devices beneath: lbs-rc-log by its name,
# the loop devices by their files' inodes). A check resumes on the same
# stack, as a machine after a power cut would: lbs-rc-log again, over loop
# devices of the same two files, work.img (the replayed image copied into it,
# the same inode) and log.img. dm-log-writes at the run may write log.img, a
# check may not (the replayer reads it), so lbs-rc-log reaches pad_sec
# sectors past the slices: at the run, more of work.img; at a check, the
# first sectors of log.img, which nothing reads or writes there.
pad_sec=8

# slices DEV: the volume and the state filesystem over DEV, in one dmsetup call;
# the same names and UUIDs every time, so that the state's device
# (/dev/mapper/lbs-rc-data, id dm-uuid-LBS-RC-DATA) is found again
slices() {
	dmsetup create --concise "lbs-rc-data,LBS-RC-DATA,,rw,0 $data_sec linear $1 0;lbs-rc-state,LBS-RC-STATE,,rw,0 $state_sec linear $1 $data_sec" ||
		fail "the slices over $1 were refused: $(ti_error)"
}
unslice() {
	dmsetup remove lbs-rc-data lbs-rc-state || fail "the slices did not go: $(dmsetup ls)"
}

# private_left: remove what a killed or failed run left (its private
# mappings, the documented step before --resume); prints their names
private_left() {
	local m
	for m in $(dmsetup ls | awk '/^lbscrypt-reenc-/ { print $1 }'); do
		dmsetup remove "$m" >/dev/null 2>&1 || dmsetup remove --force "$m" >/dev/null 2>&1 || true
		printf '%s ' "$m"
	done
}

# base_start: a new base.img (sparse, the slices' size, every other image
# removed) on a loop device (base_loop), the slices over it
base_start() {
	rm -f "$w"/*.img
	truncate -s $((data_bytes + state_bytes + pad_sec * 512)) "$w/base.img"
	base_loop=$(losetup -f --show "$w/base.img")
	slices "$base_loop"
}
# base_end: the state filesystem made on its slice (ext4, its inode tables and
# journal written now, not by use), the slices removed, the loop detached
base_end() {
	mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 /dev/mapper/lbs-rc-state >"$w/mkfs.log" 2>&1 ||
		fail "$c_label: mkfs.ext4 of the state filesystem failed: $(cat "$w/mkfs.log")"
	unslice
	losetup -d "$base_loop"
}

# log_start LOG-SIZE: work.img (a copy of base.img) behind dm-log-writes, its
# log in log.img (LOG-SIZE, sparse), the slices over it, the state
# filesystem mounted
log_start() {
	cp --sparse=always "$w/base.img" "$w/work.img"
	rm -f "$w/log.img"
	truncate -s "$1" "$w/log.img"
	log_dl=$(losetup -f --show "$w/work.img")
	log_ll=$(losetup -f --show "$w/log.img")
	dmsetup create lbs-rc-log --table "0 $((data_sec + state_sec + pad_sec)) log-writes $log_dl $log_ll" ||
		fail "$c_label: log-writes refused: $(ti_error)"
	slices /dev/mapper/lbs-rc-log
	mount -t ext4 /dev/mapper/lbs-rc-state "$smnt" || fail "$c_label: the state filesystem does not mount: $(dmesg | tail -n 3)"
}

# log_end: after log_start and the run: all taken down; work_sum (work.img's
# sha256), the log's entries in entries.txt ("ENTRY n sector sectors flags
# mark"), its last line in log_line, its sector size in log_ss
log_end() {
	umount "$smnt"
	! dmsetup status lbs-rc-log | grep -q logging_disabled ||
		fail "$c_label: dm-log-writes stopped logging (its log device too small?): $(dmsetup status lbs-rc-log)"
	unslice
	dmsetup remove lbs-rc-log
	losetup -d "$log_dl" "$log_ll"
	work_sum=$(sha256sum <"$w/work.img")
	"$replayer" list "$w/log.img" each >"$w/entries.txt" || fail "$c_label: the log does not read: $(tail -n 1 "$w/entries.txt")"
	log_line=$(tail -n 1 "$w/entries.txt")
	log_ss=$(awk '{ print $NF }' <<<"$log_line")
}

# check_stack: the run's stack for the checks (above): cloop over work.img,
# lloop over log.img, lbs-rc-log over both; check_image copies the replayed
# image into work.img and makes the slices over /dev/mapper/lbs-rc-log
check_stack() {
	cloop=$(losetup -f --show "$w/work.img")
	lloop=$(losetup -f --show "$w/log.img")
	printf '0 %s linear %s 0\n%s %s linear %s 0\n' $((data_sec + state_sec)) "$cloop" \
		$((data_sec + state_sec)) "$pad_sec" "$lloop" | dmsetup create lbs-rc-log ||
		fail "$c_label: the check's lbs-rc-log was refused: $(ti_error)"
}
check_unstack() {
	dmsetup remove lbs-rc-log || fail "the check's lbs-rc-log did not go: $(dmsetup ls)"
	losetup -d "$cloop" "$lloop"
}

# replay_check LABEL SELECTED OPTION...: replay the log with the replayer's
# OPTIONs and check at every stop whose "KIND NUMBER" is in the file SELECTED
# (a line each); with stop_on_bad=1 the replay ends at the first check that
# is not clean; at a POINT stop check_image finds its entry of the log in
# cut_entry.
# Sets n_checked n_same n_before n_resumed n_after first_bad.
stop_on_bad=0
replay_check() {
	local label=$1 selected=$2 kind_ a b c d pid ended=0 t0=$SECONDS
	shift 2
	declare -A want_stop=()
	while read -r kind_ a; do want_stop["$kind_ $a"]=1; done <"$selected"
	cp "$w/base.img" "$w/replay.img"
	cp "$w/base.img" "$w/work.img"
	check_stack
	n_checked=0 n_same=0 n_before=0 n_resumed=0 n_after=0 first_bad="" seen_state=0
	coproc RC { "$replayer" replay "$w/log.img" "$w/replay.img" "$@"; }
	pid=$RC_PID
	while read -r -u "${RC[0]}" kind_ a b c d; do
		case $kind_ in
		POINT | TORN)
			if [ -n "${want_stop["$kind_ $a"]:-}" ]; then
				cut_entry=$b
				check_image
				n_checked=$((n_checked + 1))
				case $kind in before) n_before=$((n_before + 1)) ;; resumed) n_resumed=$((n_resumed + 1)) ;; after) n_after=$((n_after + 1)) ;; esac
				if [ -z "$problem" ]; then
					n_same=$((n_same + 1))
				else
					[ -n "$first_bad" ] || first_bad="$kind_ $a ($b $c $d): $problem"
					if [ "$stop_on_bad" = 1 ]; then
						echo stop >&"${RC[1]}"
						continue
					fi
				fi
				[ $((n_checked % 25)) != 0 ] ||
					printf '   %s: %s checked, %s the same (%s s)\n' "$label" "$n_checked" "$n_same" $((SECONDS - t0))
			fi
			;;
		TORN1 | WHOLE) ;;
		END)
			ended=1
			break
			;;
		*) fail "$label: the replayer said: $kind_ $a $b $c $d" ;;
		esac
		echo go >&"${RC[1]}"
	done
	wait "$pid" || fail "$label: the replayer failed (exit $?)"
	check_unstack
	[ "$ended" = 1 ] || [ "$stop_on_bad" = 1 ] || fail "$label: the replayer stopped before the end of the log"
	replay_secs=$((SECONDS - t0))
}

# The stops to check, from entries.txt (sectors of $log_ss bytes; the volume is
# the first $data_bytes bytes of the device).
# points_selected: every flush and FUA entry, a seeded sample of the rest (FULL:
# every entry and the state before the first), as "POINT n" lines; a point
# with no write since the last one selected leaves the same image, checked
# there, and is left out (counted); prints the counts "flushes fuas sampled
# plain same-image" on stderr
points_selected() {
	awk -v full="$full" -v n="$sample" -v seed=$((seed + 7919 * $1)) '
		$1 == "ENTRY" {
			ne++; fl[ne] = $5; wr[ne] = $4 > 0 && $5 !~ /M/
			if ($5 ~ /[FU]/) { pick[ne] = 1; f += ($5 ~ /F/); u += ($5 ~ /U/) }
			else plain[++np] = ne
		}
		END {
			if (full == 1) { print "POINT 0"; for (i = 1; i <= np; i++) pick[plain[i]] = 1; n = np }
			else {
				srand(seed)
				if (n > np) n = np
				for (k = 0; k < n; ) { i = plain[int(rand() * np) + 1]; if (!(i in pick)) { pick[i] = 1; k++ } }
			}
			changed = 1
			for (e = 1; e <= ne; e++) {
				if (wr[e]) changed = 1
				if (!(e in pick)) continue
				if (changed) { print "POINT " e; changed = 0 } else same++
			}
			printf "%d %d %d %d %d\n", f, u, n, np, same > "/dev/stderr"
		}' "$w/entries.txt"
}

# resume_cut: at a cut (the check image's slices made): mount the state
# filesystem (its journal replays); when the state file is there, `lbscrypt
# reencrypt --resume` (reenc_resume). Sets problem (what went wrong, or ""),
# kind (before: no state file yet; resumed; after: the run had removed it),
# seen_state, and journal_block (the first 4096-byte block of the state
# filesystem holding the journal's first slot, the first time the journal is
# seen). Leaves no private mapping and an empty registry behind.
journal_block=""
seen_state=0
resume_cut() {
	local out
	problem="" kind=""
	if ! mount -t ext4 /dev/mapper/lbs-rc-state "$smnt" 2>"$w/mount.err"; then
		problem="the state filesystem does not mount: $(tr '\n' ' ' <"$w/mount.err") $(dmesg | tail -n 3 | tr '\n' ' ')"
	else
		if [ -e "$smnt/run.state" ]; then
			seen_state=1 kind=resumed
			if [ -z "$journal_block" ] && [ -f "$smnt/run.state.journal" ]; then
				# its first block: the journaled record's slot (the controls lose it)
				journal_block=$(filefrag -e -b4096 "$smnt/run.state.journal" 2>/dev/null |
					awk '$1 == "0:" && $2 == "0.." { sub(/\.\.$/, "", $4); print $4; exit }') || true
				[ -n "$journal_block" ] || journal_block=$(debugfs -R "bmap /run.state.journal 0" \
					/dev/mapper/lbs-rc-state 2>/dev/null | tail -n 1) || true
			fi
			out=$(reenc_resume "$smnt/run.state" 2>&1) || problem="--resume failed: $(head -n 2 <<<"$out" | tr '\n' ' ')"
			[ ! -e "$smnt/run.state" ] || [ -n "$problem" ] || problem="--resume left the state file"
		elif [ "$seen_state" = 1 ]; then
			kind=after
		else
			kind=before
		fi
		umount "$smnt"
	fi
	# what a failed resume left: its private mappings, its registry entry
	if [[ $(dmsetup ls) == *lbscrypt-reenc-* ]]; then
		problem+="${problem:+; }private mappings left: $(private_left)"
	fi
	[ -z "$(compgen -G "$registry/*")" ] || rm -rf "$registry"
}

# control_selected: the flush entries after writes of the volume, as POINT lines
control_selected() {
	awk -v ss="$log_ss" -v vol=$((data_bytes)) '
		$1 == "ENTRY" {
			if ($4 > 0 && $5 !~ /[DM]/ && $3 * ss < vol) pending = 1
			if ($5 ~ /F/ && pending) { print "POINT " $2; pending = 0 }
		}' "$w/entries.txt"
}

# journal_control TAG SAME: a control, after a replay_check that saw the
# journal: the log replayed again with the journaled record's block lost (the
# run then cannot know which hotzone was in flight), checked at the flushes
# after the volume's writes up to the first check that is not clean; one must
# not be (SAME says what a clean check found), or the check cannot fail.
journal_control() {
	local tag=$1 same=$2
	[ -n "$journal_block" ] || fail "control: the journal's first block was not found (filefrag at the checks)"
	control_selected >"$w/control.sel"
	stop_on_bad=1
	replay_check "$c_label control" "$w/control.sel" each "lose=$((data_bytes + journal_block * 4096)):4096"
	stop_on_bad=0
	printf '%s %s control: the journaled record'"'"'s writes lost: %s checked, %s with %s; the first not: %s\n' \
		"$tag" "$c_label" "$n_checked" "$n_same" "$same" "${first_bad:-none}"
	[ "$n_same" -lt "$n_checked" ] || fail "$c_label control: with the journaled record lost every cut still had $same: the check cannot fail"
	ok "$c_label control: the check fails where the journal is lost, as it must"
	controls_failed=$((controls_failed + 1))
}
