#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt offline, cut at every flush and FUA (and torn), resumes to the same plaintext
# BOOT: lbscrypt
# KERNELS: arm64-64k
# FULL-KERNELS: page>16384
# LIMIT: 300 make check: the 4096->65536 ext4 conversion alone, 39 cut points, no tears: 75 s on a loaded host
# FULL-LIMIT: 3600 three conversions, torn, the control, faults; LBS_REENC_CUTS_FULL=1: every write point and every tear
# ENV: LBS_REENC_CUTS_PARTS=cuts LBS_REENC_CUTS_CONVERSIONS=ext4 LBS_REENC_CUTS_TORN=0
# FULL-ENV: LBS_REENC_CUTS_FULL=1
# NEEDS: tool dm-log-writes loop
# ORDER: 335
#
# reencrypt-cuts.sh: an offline `lbscrypt reencrypt` survives a power cut at
# every point that matters. The volume (4 MiB: the smallest a 64K-block ext4
# takes) and the state filesystem (ext4, 8 MiB) are two dm-linear slices
# (lbs-rc-data, lbs-rc-state) of ONE dm-log-writes device, so one log orders
# every write of both: the tool's fdatasyncs of its journal and state are
# flushes in the same log as the volume's. Three conversions, each with
# hotzones of 1536 KiB (three hotzones, the last short): 512 -> 4096 with a
# key change and 65536 with a key change (random data, --force), and 4096 ->
# 65536 keeping the key where the volume
# holds a 64K-block ext4 made on the 4096 volume. For each, the log of the
# whole run is replayed (/lbs/bin/logreplay, tests/guest/bin/logreplay.c) onto
# a copy of the slices as they were, and at each cut point a copy of the image
# is checked: the state filesystem mounted (its journal replays); when the
# state file is there, `lbscrypt reencrypt --resume` with both keys; then the
# whole plaintext, read through a crypt table with the new parameters, must
# hash as before the run (ext4: and e2fsck -fn clean). A cut before the state
# file exists must leave the volume as it was (read with the old parameters);
# one after the run removed it, converted.
# The cut points: every flush and FUA of the log, and a
# seeded sample (LBS_REENC_CUTS_SAMPLE, 6 a conversion; the seed printed,
# LBS_REENC_CUTS_SEED gives it) of the other writes (a cut after that write);
# a point with no write since the last one checked leaves that image, and is
# counted, not checked again;
# LBS_REENC_CUTS_FULL=1 (make check-full, make harden) checks every write point
# (and the state before the first). Torn writes, at the 65536 conversions: at
# each flush and FUA point after which writes of the volume larger than 4096
# bytes come (the writes up to the next flush laid torn at 4096-byte
# boundaries, every other unit new, as logwrites.sh tears them; FULL: at every
# point with a torn write) --resume must still give the same plaintext: the
# journal holds the hotzone's old ciphertext. A control shows the check can
# fail: the log replayed with the writes of the journal's first block (the
# "journaled" record) lost, checked at the flushes after the volume's writes,
# must NOT resume to the same plaintext somewhere.
# Faults, without the log: kill -9 of the tool at seeded random moments (after
# a random number of hotzones and milliseconds), then the private mappings
# removed and --resume; a full state filesystem (the run refused in one line
# naming it, nothing written and nothing left; and a stopped run resumes with
# its filesystem full: nothing is allocated after the start); an I/O error
# from the device (the slice under the volume swapped to the error target
# mid-run: the 64K kernel has no dm-flakey), one line saying --resume goes on;
# the slice restored, --resume finishes. Each ends with the plaintext checked.
# LBS_REENC_CUTS_PARTS=cuts or faults runs one half alone;
# LBS_REENC_CUTS_CONVERSIONS (words of 512-4096 65536 ext4, all by default)
# picks conversions, and LBS_REENC_CUTS_TORN=0 leaves the torn states out.
# make check runs the cuts of the ext4 conversion alone, without tears (ENV
# above); make check-full and make harden everything, every write point.
# The runs make their key verifiers with --pbkdf-force-iterations 1000.
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

replayer=/lbs/bin/logreplay
[ -x "$replayer" ] || fail "no $replayer (qemu/lib/guest-bin builds tests/guest/bin)"
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools-arm64)"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
modprobe dm-log-writes 2>/dev/null || true
grep -qw '^log-writes' <(dmsetup targets) || fail "no log-writes target (dm-log-writes does not load)"
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop devices for the images"
[ "$(bound)" -ge 65536 ] || fail "the page here is $(page_size) bytes: the 65536 conversions need 64K pages"

full=${LBS_REENC_CUTS_FULL:-0}
sample=${LBS_REENC_CUTS_SAMPLE:-6}
seed=${LBS_REENC_CUTS_SEED:-$(($(date +%s) % 100000))}
hotzone=${LBS_REENC_CUTS_HOTZONE:-1572864}
torn=${LBS_REENC_CUTS_TORN:-1}
# the key verifiers at cryptsetup's PBKDF2 minimum: each --resume checks both,
# about 2.5 s each at the default 200000 iterations under emulation
# (tests/guest/reencrypt.sh runs the default)
iterations=1000
printf 'REENC-CUTS seed %s (LBS_REENC_CUTS_SEED=%s repeats this run), full %s\n' "$seed" "$seed" "$full"
RANDOM=$seed

data_bytes=$((4 << 20)) state_bytes=$((8 << 20))
data_sec=$((data_bytes / 512)) state_sec=$((state_bytes / 512))
w=/tmp/lbs-rc
smnt=/mnt/lbs-rc-state
registry=/etc/lbscrypt/reencrypt
mkdir -p "$w" "$smnt"
mount -t tmpfs -o size=400M lbs-rc "$w" || fail "no tmpfs for the images at $w"
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
declare -A key_hex=()
for k in "$key_a" "$key_b"; do
	key_hex[$k]=$(od -An -v -tx1 "$k" | tr -d ' \n')
done

# crypt_table SS KEYFILE DEV: table, the volume's table over DEV with sector
# size SS (no subshell: process starts are what a check costs under TCG)
crypt_table() {
	printf -v table '0 %s crypt aes-xts-plain64 %s 0 %s 0 1 sector_size:%s' "$data_sec" "${key_hex[$2]}" "$3" "$1"
}

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

# plain_sum SS KEYFILE [ext4]: psum, the sha256 of the volume's plaintext
# read with sector size SS and KEYFILE; with ext4, e2fsck -fn must be clean
# (else problem says why)
plain_sum() {
	local rc=0
	crypt_table "$1" "$2" /dev/mapper/lbs-rc-data
	dmsetup create lbs-rc-chk --table "$table" ||
		fail "a crypt table at $1 over the volume was refused: $(ti_error)"
	# a mapping made just now has no page cache: read through O_DIRECT all the same
	psum=$(dd if=/dev/mapper/lbs-rc-chk bs=65536 iflag=direct status=none | sha256sum)
	psum=${psum%% *}
	if [ "${3:-}" = ext4 ]; then
		e2fsck -fn /dev/mapper/lbs-rc-chk >"$w/fsck.log" 2>&1 || rc=$?
		[ "$rc" = 0 ] || problem+="${problem:+; }e2fsck -fn exit $rc: $(grep -v '^Pass\|^e2fsck' "$w/fsck.log" | head -n 6 | tr '\n' '|')"
	fi
	[ "${4:-}" = keep ] || dm_remove lbs-rc-chk
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

# The conversion being tested: its label, sides, keys and whether it holds ext4.
c_label="" c_old=0 c_new=0 c_fs="" c_new_key=""
want=""

# make_base OLD-SS FS: base.img, the volume at OLD-SS with key A holding random
# data (FS ext4: then a 64K-block ext4 with a file), and the state
# filesystem; sets want (the plaintext's sha256)
make_base() {
	local loop
	rm -f "$w"/*.img
	truncate -s $((data_bytes + state_bytes)) "$w/base.img"
	loop=$(losetup -f --show "$w/base.img")
	slices "$loop"
	crypt_table "$1" "$key_a" /dev/mapper/lbs-rc-data
	dmsetup create lbs-rc-chk --table "$table" ||
		fail "a crypt table at $1 was refused: $(ti_error)"
	head -c "$data_bytes" /dev/urandom >"$w/plain"
	put "$w/plain" /dev/mapper/lbs-rc-chk 65536
	if [ "$2" = ext4 ]; then
		mkfs.ext4 -q -F -b 65536 -E nodiscard /dev/mapper/lbs-rc-chk >"$w/mkfs.log" 2>&1 ||
			fail "mkfs.ext4 -b 65536 on the $1 volume failed: $(cat "$w/mkfs.log")"
		mkdir -p /mnt/lbs-rc-vol
		mount -t ext4 /dev/mapper/lbs-rc-chk /mnt/lbs-rc-vol || fail "the 64K-block ext4 does not mount: $(dmesg | tail -n 3)"
		head -c $((512 << 10)) /dev/urandom >/mnt/lbs-rc-vol/data
		umount /mnt/lbs-rc-vol
	fi
	want=$(sha_of /dev/mapper/lbs-rc-chk "$data_bytes" 65536)
	dm_remove lbs-rc-chk
	mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 /dev/mapper/lbs-rc-state >"$w/mkfs.log" 2>&1 ||
		fail "mkfs.ext4 of the state filesystem failed: $(cat "$w/mkfs.log")"
	unslice
	losetup -d "$loop"
}

# reenc_start STATE [ARGS...]: a new run of the conversion on the volume
reenc_start() {
	local state=$1 force=()
	shift
	[ "$c_fs" = ext4 ] || force=(--force)
	lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --sector-size "$c_old" \
		--key-file "$key_a" --new-key-file "$c_new_key" --new-sector-size "$c_new" \
		"${force[@]}" --hotzone-size "$hotzone" --pbkdf-force-iterations "$iterations" \
		--state "$state" "$@" /dev/mapper/lbs-rc-data
}
# reenc_resume STATE [ARGS...]
reenc_resume() {
	local state=$1
	shift
	lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_a" --new-key-file "$c_new_key" "$@"
}

# logged_run: the conversion over dm-log-writes; leaves log.img, and the
# entries of the log in entries.txt ("ENTRY n sector sectors flags mark")
logged_run() {
	local dl ll out t0=$SECONDS
	cp "$w/base.img" "$w/work.img"
	rm -f "$w/log.img"
	truncate -s 200M "$w/log.img"
	dl=$(losetup -f --show "$w/work.img")
	ll=$(losetup -f --show "$w/log.img")
	dmsetup create lbs-rc-log --table "0 $((data_sec + state_sec)) log-writes $dl $ll" ||
		fail "$c_label: log-writes refused: $(ti_error)"
	slices /dev/mapper/lbs-rc-log
	mount -t ext4 /dev/mapper/lbs-rc-state "$smnt" || fail "$c_label: the state filesystem does not mount: $(dmesg | tail -n 3)"
	out=$(reenc_start "$smnt/run.state" 2>&1) || fail "$c_label: the logged run failed: $out"
	umount "$smnt"
	! dmsetup status lbs-rc-log | grep -q logging_disabled ||
		fail "$c_label: dm-log-writes stopped logging (its log device too small?): $(dmsetup status lbs-rc-log)"
	unslice
	dmsetup remove lbs-rc-log
	losetup -d "$dl" "$ll"
	work_sum=$(sha256sum <"$w/work.img")
	"$replayer" list "$w/log.img" each >"$w/entries.txt" || fail "$c_label: the log does not read: $(tail -n 1 "$w/entries.txt")"
	log_line=$(tail -n 1 "$w/entries.txt")
	log_ss=$(awk '{ print $NF }' <<<"$log_line")
	printf '   %s: the logged run took %s s; %s\n' "$c_label" $((SECONDS - t0)) "$log_line"
}

# check_image WHAT: copy the replay image to the check image (its loop is
# $cloop), mount the state filesystem, resume when the state file is there,
# and read the plaintext; sets problem ("" when the plaintext is the one
# before the run) and kind (before, resumed, after)
journal_block=""
check_image() {
	local out side key
	problem="" kind=""
	cp "$w/replay.img" "$w/check.img"
	slices "$cloop"
	if ! mount -t ext4 /dev/mapper/lbs-rc-state "$smnt" 2>"$w/mount.err"; then
		problem="the state filesystem does not mount: $(tr '\n' ' ' <"$w/mount.err") $(dmesg | tail -n 3 | tr '\n' ' ')"
	else
		if [ -e "$smnt/run.state" ]; then
			seen_state=1 kind=resumed
			if [ -z "$journal_block" ] && [ -f "$smnt/run.state.journal" ]; then
				# its first block: the journaled record's slot (the control loses it)
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
	side=$c_new key=$c_new_key
	[ "$kind" != before ] || side=$c_old key=$key_a
	plain_sum "$side" "$key" "$c_fs" keep
	[ "$psum" = "$want" ] || problem+="${problem:+; }the plaintext read with the ${kind:-?} parameters ($side) differs"
	dmsetup remove lbs-rc-chk lbs-rc-data lbs-rc-state || fail "the check's mappings did not go: $(dmsetup ls)"
}

# replay_check LABEL SELECTED OPTION...: replay the log with the replayer's
# OPTIONs and check at every stop whose "KIND NUMBER" is in the file SELECTED
# (a line each); with stop_on_bad=1 the replay ends at the first check that
# is not clean. Sets n_checked n_same n_before n_resumed n_after first_bad.
stop_on_bad=0
replay_check() {
	local label=$1 selected=$2 kind_ a b c d pid ended=0 t0=$SECONDS
	shift 2
	declare -A want_stop=()
	while read -r kind_ a; do want_stop["$kind_ $a"]=1; done <"$selected"
	cp "$w/base.img" "$w/replay.img"
	cp "$w/base.img" "$w/check.img"
	cloop=$(losetup -f --show "$w/check.img")
	n_checked=0 n_same=0 n_before=0 n_resumed=0 n_after=0 first_bad="" seen_state=0
	coproc RC { "$replayer" replay "$w/log.img" "$w/replay.img" "$@"; }
	pid=$RC_PID
	while read -r -u "${RC[0]}" kind_ a b c d; do
		case $kind_ in
		POINT | TORN)
			if [ -n "${want_stop["$kind_ $a"]:-}" ]; then
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
	losetup -d "$cloop"
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

# tears_selected: the flush/FUA/mark points (numbered as the replayer numbers
# them without "each") after which writes of the volume longer than 4096
# bytes come before the next flush, as "TORN p" lines (FULL: every point after
# which any write longer than 4096 bytes comes)
tears_selected() {
	awk -v full="$full" -v ss="$log_ss" -v vol=$((data_bytes)) '
		$1 == "ENTRY" { n++; sec[n] = $3; nr[n] = $4; fl[n] = $5 }
		END {
			for (i = 1; i <= n; i++) {
				if (fl[i] !~ /[FUM]/) continue
				p++; writes = 0; hit = 0
				for (j = i + 1; j <= n; j++) {
					if (nr[j] == 0 || fl[j] ~ /[DM]/) { if (fl[j] ~ /F/ && writes) break; continue }
					writes++
					if (nr[j] * ss > 4096 && (full == 1 || sec[j] * ss < vol)) hit = 1
					if (fl[j] ~ /F/) break
				}
				if (hit) print "TORN " p
			}
		}' "$w/entries.txt"
}

# control_selected: the flush entries after writes of the volume, as POINT lines
control_selected() {
	awk -v ss="$log_ss" -v vol=$((data_bytes)) '
		$1 == "ENTRY" {
			if ($4 > 0 && $5 !~ /[DM]/ && $3 * ss < vol) pending = 1
			if ($5 ~ /F/ && pending) { print "POINT " $2; pending = 0 }
		}' "$w/entries.txt"
}

total_checked=0 total_same=0 n_convert=0
# convert LABEL OLD NEW NEWKEY FS: the logged run and its replays
convert() {
	local counts f u s np same
	c_label=$1 c_old=$2 c_new=$3 c_new_key=$4 c_fs=$5
	n_convert=$((n_convert + 1))
	journal_block=""
	make_base "$c_old" "$c_fs"
	logged_run
	counts=$(points_selected "$n_convert" 2>&1 >"$w/points.sel")
	read -r f u s np same <<<"$counts"
	[ $((f + u)) -ge 6 ] || fail "$c_label: only $f flushes and $u FUA writes in the log: the run did not go through the state filesystem and the volume"
	replay_check "$c_label" "$w/points.sel" each
	[ "$(sha256sum <"$w/replay.img")" = "$work_sum" ] ||
		fail "$c_label: the log replayed to its end differs from the logged device (the replayer or the log is wrong)"
	printf 'REENC-CUTS %s: cut points checked %s (flushes %s, FUA %s, sampled %s of %s other writes; %s more leave the image of one checked), the same plaintext %s: before the run %s, resumed %s, after the run %s (%s s)\n' \
		"$c_label" "$n_checked" "$f" "$u" "$s" "$np" "$same" "$n_same" "$n_before" "$n_resumed" "$n_after" "$replay_secs"
	total_checked=$((total_checked + n_checked)) total_same=$((total_same + n_same))
	[ "$n_same" = "$n_checked" ] || fail "$c_label: $((n_checked - n_same)) of $n_checked cut points did not give the plaintext back; the first: $first_bad"
	{ [ "$n_before" -ge 1 ] && [ "$n_resumed" -ge 3 ]; } ||
		fail "$c_label: the cut points checked missed a phase (before the run $n_before, resumed $n_resumed)"
	ok "$c_label: every cut point checked gives the plaintext back ($n_checked)"

	if [ "$torn" = 1 ] && { [ "$c_new" -gt 4096 ] || [ "$c_old" -gt 4096 ]; }; then
		tears_selected >"$w/tears.sel"
		[ -s "$w/tears.sel" ] || fail "$c_label: no point before a torn write of the volume: the log has none larger than 4096 bytes"
		replay_check "$c_label torn" "$w/tears.sel" tear=4096
		printf 'REENC-CUTS %s torn: torn states checked %s (the writes up to the next flush torn at 4096 bytes), the same plaintext %s: resumed %s (%s s)\n' \
			"$c_label" "$n_checked" "$n_same" "$n_resumed" "$replay_secs"
		total_checked=$((total_checked + n_checked)) total_same=$((total_same + n_same))
		[ "$n_same" = "$n_checked" ] || fail "$c_label torn: $((n_checked - n_same)) of $n_checked torn states did not give the plaintext back; the first: $first_bad"
		ok "$c_label: every torn state checked gives the plaintext back ($n_checked)"
	fi
}

# control: the last conversion's log replayed with the journaled record's block
# lost: some flush after the volume's writes must not give the plaintext back
control() {
	[ -n "$journal_block" ] || fail "control: the journal's first block was not found (filefrag at the checks)"
	control_selected >"$w/control.sel"
	stop_on_bad=1
	replay_check "$c_label control" "$w/control.sel" each "lose=$((data_bytes + journal_block * 4096)):4096"
	stop_on_bad=0
	printf 'REENC-CUTS %s control: the journaled record'"'"'s writes lost: %s checked, %s the same; the first not: %s\n' \
		"$c_label" "$n_checked" "$n_same" "${first_bad:-none}"
	[ "$n_same" -lt "$n_checked" ] || fail "$c_label control: with the journaled record lost every cut still resumed to the same plaintext: the check cannot fail"
	ok "$c_label control: the check fails where the journal is lost, as it must"
	controls_failed=$((controls_failed + 1))
}

t_all=$SECONDS
controls_failed=0
# LBS_REENC_CUTS_PARTS: "cuts faults" by default; one of them alone, to look at it
parts=" ${LBS_REENC_CUTS_PARTS:-cuts faults} "
# LBS_REENC_CUTS_CONVERSIONS: which conversions the cuts part runs (all three
# by default; the control follows "65536")
conversions=" ${LBS_REENC_CUTS_CONVERSIONS:-512-4096 65536 ext4} "
for c in $conversions; do
	case $c in 512-4096 | 65536 | ext4) ;; *) fail "LBS_REENC_CUTS_CONVERSIONS: no conversion '$c' (512-4096, 65536, ext4)" ;; esac
done
if [[ $parts == *" cuts "* ]]; then
	[[ $conversions != *" 512-4096 "* ]] || convert "512->4096 new key" 512 4096 "$key_b" ""
	if [[ $conversions == *" 65536 "* ]]; then
		convert "65536 new key" 65536 65536 "$key_b" ""
		control
	fi
	[[ $conversions != *" ext4 "* ]] || convert "4096->65536 ext4" 4096 65536 "$key_a" ext4
fi
total() {
	printf 'REENC-CUTS total: %s states checked, %s gave the plaintext back; controls failed as they must: %s; seed %s; %s s\n' \
		"$total_checked" "$total_same" "$controls_failed" "$seed" $((SECONDS - t_all))
}
if [[ $parts != *" faults "* ]]; then
	total
	exit 0
fi

# ---- faults, without the log --------------------------------------------------------------
# setup_plain: the base image's slices on a loop (the volume as make_base left
# it), the state filesystem mounted
setup_plain() {
	cloop=$(losetup -f --show "$w/base.img")
	slices "$cloop"
	mount -t ext4 /dev/mapper/lbs-rc-state "$smnt" || fail "the state filesystem does not mount"
}
teardown_plain() {
	umount "$smnt"
	unslice
	losetup -d "$cloop"
}
# check_new WHAT: the volume reads with the new parameters as before
check_new() {
	problem=""
	plain_sum "$c_new" "$c_new_key" "$c_fs"
	[ "$psum" = "$want" ] || problem+="${problem:+; }the plaintext differs"
	[ -z "$problem" ] || fail "$1: $problem"
}
# one_line WHAT OUT: OUT is one line (the tool's error)
one_line() {
	[ "$(printf '%s\n' "$2" | grep -c .)" = 1 ] || fail "$1: the error is not one line: $2"
}

c_label=faults c_old=512 c_new=4096 c_new_key=$key_b c_fs=""
hotzone=32768 # 128 hotzones: the kills and the error land in the middle
make_base 512 ""
setup_plain
state=$smnt/kill.state
kills=${LBS_REENC_CUTS_KILLS:-3}
what="kill -9 at $kills random moments"
for ((k = 1; k <= kills; k++)); do
	after=$((RANDOM % 30 + 1)) ms=$((RANDOM % 100))
	rm -f "$w/run.json"
	if [ -e "$state" ]; then
		lbscrypt -q reencrypt --resume --state "$state" --key-file "$key_a" --new-key-file "$c_new_key" --json >"$w/run.json" 2>&1 &
	else
		lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --sector-size 512 --key-file "$key_a" \
			--new-key-file "$key_b" --new-sector-size 4096 --force --json --hotzone-size "$hotzone" \
			--pbkdf-force-iterations "$iterations" --state "$state" /dev/mapper/lbs-rc-data >"$w/run.json" 2>&1 &
	fi
	pid=$!
	for _ in $(seq 600); do
		[ "$(grep -c done_bytes "$w/run.json" 2>/dev/null)" -lt "$after" ] || break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	sleep "0.$(printf '%03d' "$ms")"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" || true
	printf '   kill %s: after %s hotzones and %s ms: %s\n' "$k" "$after" "$ms" \
		"$(grep -o '"done_bytes":[0-9]*' "$w/run.json" | tail -n 1)"
	private_left >/dev/null
	[ -e "$state" ] || fail "$what: no state after kill $k (the run ended first?): $(tail -n 2 "$w/run.json")"
done
out=$(reenc_resume "$state" 2>&1) || fail "$what: --resume failed: $out"
check_new "$what"
[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: the registry keeps $(ls "$registry")"
ok "$what (seed $seed): --resume finished, the plaintext is the same"
teardown_plain

# a full state filesystem
make_base 512 ""
setup_plain
what="a full state filesystem"
before=$(sha_of /dev/mapper/lbs-rc-data "$data_bytes" 65536)
# full to the last block: 64 KiB writes, then 4 KiB ones for what they leave
dd if=/dev/zero of="$smnt/fill" bs=64k 2>/dev/null || true
dd if=/dev/zero of="$smnt/fill4k" bs=4k 2>/dev/null || true
sync
state=$smnt/full.state
if out=$(reenc_start "$state" 2>&1); then
	fail "$what: the run was accepted with the filesystem full"
fi
one_line "$what" "$out"
grep -q "state filesystem is full" <<<"$out" || fail "$what: the error says: $out"
{ [ ! -e "$state" ] && [ ! -e "$state.journal" ]; } || fail "$what: the refused run left $(ls "$smnt")"
[ -z "$(ls -A "$registry" 2>/dev/null)" ] || fail "$what: the refused run left a registry entry"
[ -z "$(private_left)" ] || fail "$what: the refused run left its private mappings"
[ "$(sha_of /dev/mapper/lbs-rc-data "$data_bytes" 65536)" = "$before" ] || fail "$what: the refused run changed the volume"
ok "$what: refused in one line, nothing written, nothing left: $out"
rm "$smnt/fill" "$smnt/fill4k"
sync
lbscrypt -q reencrypt --cipher aes-xts-plain64 --key-size 512 --sector-size 512 --key-file "$key_a" \
	--new-key-file "$key_b" --new-sector-size 4096 --force --json --hotzone-size "$hotzone" \
	--pbkdf-force-iterations "$iterations" --state "$state" /dev/mapper/lbs-rc-data >"$w/run.json" 2>&1 &
pid=$!
for _ in $(seq 600); do
	grep -q done_bytes "$w/run.json" 2>/dev/null && break
	sleep 0.05
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 143 ] || fail "$what: exit $rc after SIGTERM, not 143: $(tail -n 2 "$w/run.json")"
dd if=/dev/zero of="$smnt/fill" bs=64k 2>/dev/null || true
dd if=/dev/zero of="$smnt/fill4k" bs=4k 2>/dev/null || true
sync
out=$(reenc_resume "$state" 2>&1) || fail "$what: --resume with the filesystem full failed: $out"
check_new "$what"
ok "$what: a run stopped, the filesystem filled, --resume finishes (nothing is allocated after the start)"
rm -f "$smnt/fill" "$smnt/fill4k"
teardown_plain

# an I/O error from the device, mid-run
make_base 512 ""
setup_plain
what="an I/O error from the device"
state=$smnt/eio.state
# the error table loaded beforehand (inactive), so the swap is one suspend and resume
dmsetup load lbs-rc-data --table "0 $data_sec error" || fail "$what: the error table was refused: $(ti_error)"
reenc_start "$state" --json >"$w/run.json" 2>"$w/run.err" &
pid=$!
for _ in $(seq 600); do
	[ "$(grep -c done_bytes "$w/run.json" 2>/dev/null)" -lt $((RANDOM % 8 + 2)) ] || break
	sleep 0.05
done
{ dmsetup suspend lbs-rc-data && dmsetup resume lbs-rc-data; } ||
	fail "$what: the error target did not go under the volume"
printf '   the error target under the volume after %s\n' "$(grep -o '"done_bytes":[0-9]*' "$w/run.json" | tail -n 1)"
rc=0
wait "$pid" || rc=$?
out=$(cat "$w/run.err")
[ "$rc" != 0 ] || fail "$what: the run ended well on a device that fails every I/O"
one_line "$what" "$out"
grep -q -- "--resume" <<<"$out" || fail "$what: the error does not say how to go on: $out"
ok "$what: exit $rc, one line: $out"
[ -e "$state" ] || fail "$what: the state is gone"
[ -z "$(private_left)" ] || fail "$what: the run left its private mappings"
{ dmsetup load lbs-rc-data --table "0 $data_sec linear $cloop 0" && dmsetup suspend lbs-rc-data && dmsetup resume lbs-rc-data; } ||
	fail "$what: the volume's slice did not come back"
out=$(reenc_resume "$state" 2>&1) || fail "$what: --resume failed: $out"
check_new "$what"
ok "$what: the device restored, --resume finishes, the plaintext is the same"
teardown_plain

total
