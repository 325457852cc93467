#!/usr/bin/env bash
# DESCRIPTION: lbscrypt reencrypt offline, cut at every flush and FUA (and torn), resumes to the same plaintext
# BOOT: lbscrypt
# KERNELS: arm64-64k
# FULL-KERNELS: page>16384
# LIMIT: 300 make check: the 4096->65536 ext4 conversion with a new key, no tears
# FULL-LIMIT: 3600 four conversions, torn, the control, faults; LBS_REENC_CUTS_FULL=1: every write point and every tear
# ENV: LBS_REENC_CUTS_PARTS=cuts LBS_REENC_CUTS_CONVERSIONS=ext4-new-key LBS_REENC_CUTS_TORN=0
# FULL-ENV: LBS_REENC_CUTS_FULL=1
# NEEDS: tool dm-log-writes loop
# ORDER: 335
#
# reencrypt-cuts.sh: an offline `lbscrypt reencrypt` survives a power cut at
# every point that matters. The volume (4 MiB: the smallest a 64K-block ext4
# takes) and the state filesystem (ext4, 8 MiB) are two dm-linear slices
# (lbs-rc-data, lbs-rc-state) of ONE dm-log-writes device, so one log orders
# every write of both: the tool's fdatasyncs of its journal and state are
# flushes in the same log as the volume's. Four conversions, each with
# hotzones of 1536 KiB (three hotzones, the last short): 512 -> 4096 with a
# key change and 65536 with a key change (random data, --force), and 4096 ->
# 65536 where the volume holds a 64K-block ext4 made on the 4096 volume,
# once keeping the key and once changing it. For each, the log of the
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
# LBS_REENC_CUTS_CONVERSIONS (words, or a comma-separated list, of 512-4096 65536 ext4 ext4-new-key, all by default)
# picks conversions, and LBS_REENC_CUTS_TORN=0 leaves the torn states out.
# make check runs the cuts of the ext4 conversion with a new key (the key
# change and the sector growth in one run), without tears (ENV above); make
# check-full and make harden everything, every write point.
# The runs make their key verifiers with --pbkdf-force-iterations 1000.
# (At the default 200000 iterations each --resume spends about 5 s of emulated
# CPU checking the two keys.) Prints a
# REENC-CUTS line per replay (cut points checked: flushes, FUA, sampled; the
# same plaintext before the run, resumed, after it) and a total with the
# controls that failed as they must. Measured runs: results/make-check.md.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"
# shellcheck source=tests/guest/common/reencrypt-replay.sh
. "$(dirname "$0")/common/reencrypt-replay.sh"

cuts_ready
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
cuts_workspace /tmp/lbs-rc 400M

# crypt_table SS KEYFILE DEV: table, the volume's table over DEV with sector
# size SS (no subshell: process starts are what a check costs under TCG)
crypt_table() {
	printf -v table '0 %s crypt aes-xts-plain64 %s 0 %s 0 1 sector_size:%s' "$data_sec" "${key_hex[$2]}" "$3" "$1"
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
		[ "$rc" = 0 ] || problem+="${problem:+; }e2fsck -fn exit $rc: $(grep -v '^Pass\|^e2fsck' "$w/fsck.log" | head -n 6 | tr '\n' '|' || true)"
	fi
	[ "${4:-}" = keep ] || dm_remove lbs-rc-chk
}

# The conversion being tested: its label, sides, keys and whether it holds ext4.
c_label="" c_old=0 c_new=0 c_fs="" c_new_key=""
want=""

# make_base OLD-SS FS: base.img, the volume at OLD-SS with key A holding random
# data (FS ext4: then a 64K-block ext4 with a file), and the state
# filesystem; sets want (the plaintext's sha256)
make_base() {
	base_start
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
	base_end
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
	local out t0=$SECONDS
	log_start 200M
	out=$(reenc_start "$smnt/run.state" 2>&1) || fail "$c_label: the logged run failed: $out"
	log_end
	printf '   %s: the logged run took %s s; %s\n' "$c_label" $((SECONDS - t0)) "$log_line"
}

# check_image: copy the replay image into work.img (the check's stack,
# check_stack), resume when the state file is there (resume_cut), and read the
# plaintext; sets problem ("" when the plaintext is the one before the run)
# and kind (before, resumed, after)
check_image() {
	local side key
	cp "$w/replay.img" "$w/work.img"
	slices /dev/mapper/lbs-rc-log
	resume_cut
	side=$c_new key=$c_new_key
	[ "$kind" != before ] || side=$c_old key=$key_a
	plain_sum "$side" "$key" "$c_fs" keep
	[ "$psum" = "$want" ] || problem+="${problem:+; }the plaintext read with the ${kind:-?} parameters ($side) differs"
	dmsetup remove lbs-rc-chk lbs-rc-data lbs-rc-state || fail "the check's mappings did not go: $(dmsetup ls)"
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

t_all=$SECONDS
controls_failed=0
# LBS_REENC_CUTS_PARTS: "cuts faults" by default; one of them alone, to look at it
parts=" ${LBS_REENC_CUTS_PARTS:-cuts faults} "
# LBS_REENC_CUTS_CONVERSIONS: which conversions the cuts part runs (all four
# by default; the control follows "65536")
conversions=${LBS_REENC_CUTS_CONVERSIONS:-512-4096 65536 ext4 ext4-new-key}
conversions=" ${conversions//,/ } "
for c in $conversions; do
	case $c in 512-4096 | 65536 | ext4 | ext4-new-key) ;; *) fail "LBS_REENC_CUTS_CONVERSIONS: no conversion '$c' (512-4096, 65536, ext4, ext4-new-key)" ;; esac
done
if [[ $parts == *" cuts "* ]]; then
	[[ $conversions != *" 512-4096 "* ]] || convert "512->4096 new key" 512 4096 "$key_b" ""
	if [[ $conversions == *" 65536 "* ]]; then
		convert "65536 new key" 65536 65536 "$key_b" ""
		journal_control REENC-CUTS "the same plaintext"
	fi
	[[ $conversions != *" ext4 "* ]] || convert "4096->65536 ext4" 4096 65536 "$key_a" ext4
	[[ $conversions != *" ext4-new-key "* ]] || convert "4096->65536 ext4 new key" 4096 65536 "$key_b" ext4
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
