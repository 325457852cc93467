#!/usr/bin/env bash
# DESCRIPTION: what a torn encryption sector reads back, every mode and size, both targets
# BOOT: both
# KERNELS: all -arm64-16k -arm64-4k
#   the same 6.12 runs it on arm64-64k (every size of the table, 16384 and 4096
#   among them) and amd64-4k
# FULL-KERNELS: all
# LIMIT: 300 ~3400 tears, both targets, every size
# ENV: LBS_TORN_JOURNAL=0 all -amd64-4k
#   the journalled case tears dm-integrity's journal, the same on every 6.x
#   kernel: make check runs it on amd64-4k alone (a minute a kernel under load)
# FULL-ENV: LBS_TORN_FULL=1
# NEEDS: dm-integrity dm-log-writes
# ORDER: 110
#
# torn.sh: what a torn encryption sector reads back, for every mode family and
# every sector size, stock (crypt, up to 4096) beside ours (crypt_lbs, up to the
# page). Needs `--module both` and /lbs/bin/torn (tests/guest/bin/torn.c), which
# writes old and then new data through the mapping, lays every tear a device
# writing 512 or 4096 bytes atomically may leave on the ramdisk, and reads the
# sector back. Prints a line per tear,
#   TORN <target> <mode> <sector size> <unit> <tear> <what each 16-byte block read>
# which tests/torn/torn_table.py turns into the table of dm-crypt-lbs.rst
# ("Torn writes") and checks against it. The modes: XTS with plain64, CBC with
# essiv, CBC with elephant (BitLocker's diffuser and eboiv), and AES-GCM with
# random IVs over dm-integrity in direct mode ('D', its tags on a metadata device
# of its own, the ramdisk's second half, so the data lies on the first half as
# the mapping sees it; dm-integrity takes block sizes up to 4096). A sector of 512 bytes cannot tear under either
# unit, so the sizes start at 1024.
# The same AEAD over dm-integrity in its journalled mode ('J') is torn below
# dm-integrity instead: its writes for one new sector (journal, commit, data
# area, super block) are logged by dm-log-writes and replayed by
# /lbs/bin/logreplay onto a copy of the device as it was before, stopping
# after every write, intact, and again with the writes up to the next flush
# torn (every other unit new, for 512- and 4096-byte units at every size). At
# each stop dm-integrity opens a copy (replaying its journal) and the sector is
# read back; the tear is named p<n> (the first n writes made; p0 none), w<n>
# (and the next write torn: the one in flight) or t<n> (and all the writes
# after them up to the next flush torn, as if all were in flight at once).
# By default this case runs at 4096; LBS_TORN_JOURNAL=0 leaves it out (make
# check runs it on one kernel: dm-integrity's journal, not the page, decides
# it) and LBS_TORN_FULL=1 (make check-full, make harden) runs it at every size
# from 1024.
# tests/torn/torn_table.py check fails a tear that reads otherwise than the
# table says (stock and ours apart) and, when the run covers every size of the
# table (a 64K-page kernel), a table that is not the one the run makes;
# tests/torn/torn_table_test.py (make rig-host-test) checks it on made-up tears.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

prog=/lbs/bin/torn replayer=/lbs/bin/logreplay
[ -x "$prog" ] || fail "no $prog (qemu/lib/guest-bin builds tests/guest/bin)"
[ -x "$replayer" ] || fail "no $replayer (qemu/lib/guest-bin builds tests/guest/bin)"
modprobe dm-integrity 2>/dev/null || true
modprobe dm-log-writes 2>/dev/null || true
on_exit dmsetup remove_all
# the ramdisk's halves: the mapped data, and the AEAD case's tags
half=$(($(blockdev --getsz /dev/ram0) / 2 / 128 * 128))
dmsetup create lbs-tdata --table "0 $half linear /dev/ram0 0"
dmsetup create lbs-tmeta --table "0 $half linear /dev/ram0 $half"
data=/dev/mapper/lbs-tdata meta=/dev/mapper/lbs-tmeta
key32=$(test_key 32)
key64=$(test_key 64)
tears=0

# tear TARGET MODE SS TABLE_CIPHER KEY DEV OPTS...: map DEV (which lays its
# sectors where $data has them), tear its fourth sector under each unit below
# SS, print the TORN lines
tear() {
	local target=$1 mode=$2 ss=$3 cipher=$4 key=$5 dev=$6 unit out n
	shift 6
	local opts=("$@" "sector_size:$ss")
	dmsetup create lbs-torn --table "0 $half $target $cipher $key 0 $dev 0 ${#opts[@]} ${opts[*]}" ||
		fail "$target $mode at $ss: the table was refused: $(ti_error)"
	for unit in 512 4096; do
		[ "$unit" -lt "$ss" ] || continue
		out=$("$prog" /dev/mapper/lbs-torn "$data" $((3 * ss)) "$ss" "$unit" "$ss" 2>&1) ||
			fail "$target $mode at $ss, unit $unit: the tear helper failed: $out"
		n=$(grep -c '^TORN ' <<<"$out")
		[ "$n" -gt 0 ] || fail "$target $mode at $ss, unit $unit: no tear was tried"
		printf '%s\n' "${out//TORN /TORN $target $mode $ss $unit }"
		tears=$((tears + n))
	done
	dmsetup remove lbs-torn
}

# the journalled case's devices: five eighths of the ramdisk, over the halves
# above (never in use at the same time): the device dm-integrity formats, its
# copy before the new write, the replay's image, the copy opened at a stop,
# and dm-log-writes' log
jsz=$(($(blockdev --getsz /dev/ram0) / 8 / 128 * 128))
j=0
for name in jdev jbase jimg jopen jlog; do
	dmsetup create "lbs-t$name" --table "0 $jsz linear /dev/ram0 $((j * jsz))"
	j=$((j + 1))
done
jdev=/dev/mapper/lbs-tjdev jbase=/dev/mapper/lbs-tjbase jimg=/dev/mapper/lbs-tjimg
jopen=/dev/mapper/lbs-tjopen jlog=/dev/mapper/lbs-tjlog

# jcopy FROM TO: one journalled device's image onto another
jcopy() {
	dd if="$1" of="$2" bs=1M count=$((jsz / 2048)) iflag=direct oflag=direct status=none
}

# jmap DEV TARGET SS: dm-integrity in journalled mode over DEV (formatting it
# when its super block is zero), the target with AES-GCM over it as lbs-torn
jmap() {
	dmsetup create lbs-tint --table "0 64 integrity $1 0 28 J 1 block_size:$3" || return 1
	dmsetup create lbs-torn --table "0 64 $2 capi:gcm(aes)-random $key32 0 /dev/mapper/lbs-tint 0 2 integrity:28:aead sector_size:$3" ||
		fail "$2 over dm-integrity (J, block_size $3) was refused: $(ti_error)"
}

junmap() {
	dmsetup remove lbs-torn
	dmsetup remove lbs-tint
}

# jtear TARGET SS: the journalled case's TORN lines (see the head)
jtear() {
	local target=$1 ss=$2 off=$((3 * $2)) seed=$(($2 + 1)) unit kind a b c got n pid ended tear_at last_p last_got
	local what="$target gcm-random-journal at $ss"
	dd if=/dev/zero of="$jdev" bs=1M count=1 oflag=direct status=none
	jmap "$jdev" "$target" "$ss" || fail "$what: dm-integrity (J, block_size $ss) did not format: $(dmesg | tail -n 3 | tr '\n' ' ')"
	"$prog" put /dev/mapper/lbs-torn "$off" "$ss" "$seed" old
	junmap
	jcopy "$jdev" "$jbase"
	dd if=/dev/zero of="$jlog" bs=1M count=1 oflag=direct status=none
	dmsetup create lbs-tjlw --table "0 $jsz log-writes $jdev $jlog"
	jmap /dev/mapper/lbs-tjlw "$target" "$ss" || fail "$what: dm-integrity over dm-log-writes did not open"
	"$prog" put /dev/mapper/lbs-torn "$off" "$ss" "$seed" new
	got=$("$prog" check /dev/mapper/lbs-torn "$off" "$ss" "$seed")
	[ "$got" = "N$((ss / 16))" ] || fail "$what: the new data reads back as $got"
	junmap
	dmsetup remove lbs-tjlw
	# dm-integrity's writes for the new sector, in the order they were made
	"$replayer" list "$jlog" each | sed "s/^/   $what: /"
	# both units at every size: what tears here is dm-integrity's writes, not the sector
	for unit in 512 4096; do
		jcopy "$jbase" "$jimg"
		n=0 ended=0
		coproc JR { "$replayer" replay "$jlog" "$jimg" each tear="$unit"; }
		pid=$JR_PID
		while read -r -u "${JR[0]}" kind a b c _; do
			case $kind in
			POINT) tear_at="p$b" last_p=$b ;;
			TORN1 | TORN)
				# skipped: no write longer than the unit torn (the point's
				# state again), or one write alone (TORN1's state again)
				if [ "$c" = 0 ] || { [ "$kind" = TORN ] && [ "$b" = 1 ]; }; then
					echo go >&"${JR[1]}"
					continue
				fi
				tear_at="t$a"
				[ "$kind" = TORN ] || tear_at="w$a"
				;;
			END)
				ended=1
				break
				;;
			*) fail "$what: the replayer said: $kind $a $b" ;;
			esac
			jcopy "$jimg" "$jopen"
			if jmap "$jopen" "$target" "$ss" 2>/dev/null; then
				got=$("$prog" check /dev/mapper/lbs-torn "$off" "$ss" "$seed")
				junmap
			else
				got=error:open
				dm_remove lbs-tint
			fi
			echo "TORN $target gcm-random-journal $ss $unit $tear_at $got"
			[ "$tear_at" != "p$last_p" ] || last_got=$got
			n=$((n + 1))
			echo go >&"${JR[1]}"
		done
		wait "$pid" || fail "$what: the replayer failed"
		[ "$ended" = 1 ] || fail "$what: the replayer stopped before the end of the log"
		[ "$n" -gt 0 ] || fail "$what: the replayer made no stop"
		[ "$last_got" = "N$((ss / 16))" ] ||
			fail "$what: after the log's last write (entry $last_p) the sector reads $last_got, not the new data"
		cmp -s -n $((jsz * 512)) "$jimg" "$jdev" ||
			fail "$what: the log replayed to its end differs from the device (the replayer or the log is wrong)"
		tears=$((tears + n))
	done
}

for target in crypt crypt_lbs; do
	max=4096
	[ "$target" = crypt ] || max=$(bound)
	for ss in $(sizes_upto "$max"); do
		[ "$ss" -gt 512 ] || continue
		tear "$target" xts-plain64 "$ss" aes-xts-plain64 "$key64" "$data"
		tear "$target" cbc-essiv "$ss" aes-cbc-essiv:sha256 "$key32" "$data"
		tear "$target" cbc-elephant "$ss" aes-cbc-elephant "$key64" "$data"
		[ "$ss" -le 4096 ] || continue
		# dm-integrity in direct mode, its tags (12-byte IV + 16-byte tag) on $meta
		dd if=/dev/zero of="$meta" bs=1M count=8 oflag=direct status=none
		dmsetup create lbs-tint --table "0 $half integrity $data 0 28 D 2 block_size:$ss meta_device:$meta" ||
			fail "dm-integrity (D, block_size $ss, tags on $meta) was refused: $(dmesg | tail -n 3 | tr '\n' ' ')"
		tear "$target" gcm-random "$ss" 'capi:gcm(aes)-random' "$key32" /dev/mapper/lbs-tint integrity:28:aead
		dmsetup remove lbs-tint
		# the journalled case at 4096 (unless LBS_TORN_JOURNAL=0), at every size
		# with LBS_TORN_FULL=1
		if [ "${LBS_TORN_FULL:-0}" != 1 ]; then
			[ "$ss" = 4096 ] || continue
			[ "${LBS_TORN_JOURNAL:-1}" != 0 ] || continue
		fi
		jtear "$target" "$ss"
	done
	ok "$target: every mode and sector size from 1024 to $max torn under 512- and 4096-byte units"
done
ok "$tears tears read back (TORN lines: tests/torn/torn_table.py)"
