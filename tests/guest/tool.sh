#!/usr/bin/env bash
# DESCRIPTION: the lbscrypt tool against ours as crypt, and beside cryptsetup
# BOOT: lbscrypt
# KERNELS: all -arm64-16k -arm64-4k -arm64-4k-6.1
#   the matrix runs the tool's gate on every kernel
# FULL-KERNELS: all
# LIMIT: 300 cryptsetup beside it for every case
# NEEDS: tool
# ORDER: 310
#
# tool.sh: the lbscrypt tool against dm-crypt-lbs loaded as `crypt`. Needs `--module lbscrypt`.
# - `lbscrypt open --type plain --sector-size <largest here>` works (65536 on a
#   64K-page kernel), the table and the block size say so, data round-trips,
#   `lbscrypt status` reports it, `lbscrypt close` removes it; the raw bytes go to
#   the host's reference check (REFERENCE lines).
# - a sector size above the page size is refused (one line, non-zero exit, no
#   device), on 4K kernels that is 8192.
# - the same passphrase (stdin; every hash below, the defaults, --key-file=-, -l)
#   and the same key file (with --keyfile-offset/--keyfile-size) give the same key
#   and table in `lbscrypt open` as in `cryptsetup open --type plain` (dmsetup
#   table --showkeys); lbscrypt's defaults are cryptsetup 2.7's, so the guest's
#   cryptsetup 2.6 is given them explicitly.
# - drop-in: lbscrypt's mapping has the DM UUID
#   CRYPT-PLAIN-<name>, lsblk shows TYPE crypt, `cryptsetup status` reports it as
#   PLAIN with the same lines `lbscrypt status` prints (lbscrypt adds its own after
#   them) and `cryptsetup close` removes it; status of a missing mapping, close of
#   a missing one, open of an existing name and open of a missing device give
#   cryptsetup's exit codes and texts; a regular file gets a loop device that
#   goes away on close; negative numbers and an unaligned --skip are refused with
#   one line and no device.
# Also: the passphrase with sha256, sha512 and the default hash; the key file
# with --skip, --offset and --sector-size 4096 --iv-large-sectors; every hash of
# a list (sha1 ... sha3-512, plain): both tools open with the same key, or both
# refuse; cryptsetup status agrees with lbscrypt status also while suspended;
# close of a mapping in use exits as cryptsetup's does (non-zero) and leaves
# it; overflowing numbers are refused like negative ones.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
bytes=$((1 << 20))
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools tools-arm64)"
# A distribution boot creates /dev/loop-control (kmod static-nodes) and the first
# open loads the loop module; the rig's minimal /init does not: load it here.
[ -e /dev/loop-control ] || modprobe loop || fail "the loop module does not load: no loop devices for the regular-file case"
[ -e /dev/loop-control ] || fail "modprobe loop made no /dev/loop-control"
[ "$(target_version crypt)" = v1.30.0 ] || fail "crypt is $(target_version crypt), expected ours v1.30.0"
on_exit lbscrypt close lbs-tool
on_exit cryptsetup close lbs-cs
key=/tmp/tool.key
test_key_file "$key" 64
page=$(page_size)
big=$(bound)

# open at the largest size this kernel allows
pattern "$bytes" >/tmp/tool.plain
want=$(sha256sum </tmp/tool.plain | cut -d' ' -f1)
dd if=/dev/zero of="$dev" bs=64k count=$((bytes / 65536)) oflag=direct status=none
what="lbscrypt open --type plain --sector-size $big"
out=$(lbscrypt open --type plain --cipher aes-xts-plain64 --key-size 512 --key-file "$key" \
	--sector-size "$big" --size $((bytes / 512)) "$dev" lbs-tool 2>&1) || fail "$what: failed: $out"
tab=$(dmsetup table lbs-tool)
[ "$big" = 512 ] || grep -q " sector_size:$big\\b" <<<"$tab" || fail "$what: the table is $tab"
[ "$(lbsize "$(dm_blkdev lbs-tool)")" = "$big" ] || fail "$what: logical_block_size $(lbsize "$(dm_blkdev lbs-tool)")"
put /tmp/tool.plain /dev/mapper/lbs-tool 65536
[ "$(sha_of /dev/mapper/lbs-tool "$bytes" 65536)" = "$want" ] || fail "$what: the data does not read back"
printf 'REFERENCE tool crypt aes-xts-plain64 %s 0 0 %s %s\n' "$big" "$bytes" "$(sha_of "$dev" "$bytes" 65536)"
st=$(lbscrypt status lbs-tool) || fail "lbscrypt status failed: $st"
grep -q "$big" <<<"$st" || fail "lbscrypt status does not show the sector size $big:$(printf '\n%s' "$st")"
grep -q "1.30.0" <<<"$st" || fail "lbscrypt status does not show the target version 1.30.0:$(printf '\n%s' "$st")"
lbscrypt close lbs-tool || fail "lbscrypt close failed"
! dmsetup info lbs-tool >/dev/null 2>&1 || fail "lbs-tool is still there after lbscrypt close"
ok "$what: table, logical_block_size, data round trip, status, close (table: ${tab#* * crypt })"

# above the page size: refused, nothing created
over=$((page * 2))
if out=$(lbscrypt open --type plain --key-file "$key" --key-size 512 --sector-size "$over" \
	--size $((bytes / 512)) "$dev" lbs-tool 2>&1); then
	fail "lbscrypt open --sector-size $over on a $page-byte page kernel succeeded"
fi
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "--sector-size $over: the refusal is not one line: $out"
grep -qiE 'page size|65536' <<<"$out" || fail "--sector-size $over: the refusal does not give the page size as the reason: $out"
! dmsetup info lbs-tool >/dev/null 2>&1 || fail "--sector-size $over: a device was created"
ok "lbscrypt open --sector-size $over refused: $out"

# the same key as cryptsetup: passphrase and key file
showkey() {	# showkey NAME: the table with keys, minus nothing (both map the same device)
	dmsetup table --showkeys "$1"
}
same_key() {	# same_key WHAT STDIN ARGS...: open with both tools, compare the tables
	local what=$1 input=$2 c l
	shift 2
	printf '%s' "$input" | cryptsetup open --type plain --size 2048 "$@" "$dev" lbs-cs ||
		fail "$what: cryptsetup open failed"
	c=$(showkey lbs-cs)
	cryptsetup close lbs-cs
	printf '%s' "$input" | lbscrypt open --type plain --size 2048 "$@" "$dev" lbs-tool ||
		fail "$what: lbscrypt open failed"
	l=$(showkey lbs-tool)
	lbscrypt close lbs-tool
	[ "$c" = "$l" ] || fail "$what: the tables differ: cryptsetup '$c', lbscrypt '$l'"
	ok "$what: same table and key as cryptsetup (${c:0:48}...)"
}
# cipher and key size given: cryptsetup 2.6's defaults are not 2.7's, which lbscrypt has
xts=(--cipher aes-xts-plain64 --key-size 512)
same_key "passphrase on stdin, --hash sha256" $'correct horse battery staple\n' --hash sha256 "${xts[@]}"
same_key "passphrase on stdin, --hash sha512, aes-cbc-essiv:sha256 256 bits" $'p4ss w0rd\n' \
	--hash sha512 --cipher aes-cbc-essiv:sha256 --key-size 256
same_key "passphrase on stdin, --hash ripemd160 (2.6's default)" $'another passphrase\n' \
	--hash ripemd160 "${xts[@]}"
same_key "--key-file=- (all of stdin, newlines kept), --hash sha256" $'line one\nline two\n' \
	--key-file - --hash sha256 "${xts[@]}"
same_key "passphrase on stdin cut by -l 5" $'long passphrase\n' -l 5 --hash sha256 "${xts[@]}"
same_key "--key-file=- --hash plain (key bytes as they are)" \
	'0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef' \
	--key-file - --hash plain "${xts[@]}"
# every hash: the same key as cryptsetup's, or refused by both
for h in sha1 sha224 sha384 sha512 ripemd160 whirlpool sha3-256 sha3-512 sha256:20 plain; do
	pass=$'hash test passphrase\n'
	if printf '%s' "$pass" | cryptsetup open --type plain --size 2048 --hash "$h" "${xts[@]}" "$dev" lbs-cs 2>/dev/null; then
		c=$(dmsetup table --showkeys lbs-cs)
		cryptsetup close lbs-cs
		printf '%s' "$pass" | lbscrypt open -q --type plain --size 2048 --hash "$h" "${xts[@]}" "$dev" lbs-tool ||
			fail "--hash $h: cryptsetup opens it, lbscrypt open failed"
		l=$(dmsetup table --showkeys lbs-tool)
		lbscrypt close lbs-tool
		[ "$c" = "$l" ] || fail "--hash $h: the tables differ: cryptsetup '$c', lbscrypt '$l'"
		ok "--hash $h: same key as cryptsetup"
	else
		if printf '%s' "$pass" | lbscrypt open -q --type plain --size 2048 --hash "$h" "${xts[@]}" "$dev" lbs-tool 2>/dev/null; then
			fail "--hash $h: cryptsetup refuses it, lbscrypt opened it"
		fi
		! dmsetup info lbs-tool >/dev/null 2>&1 || fail "--hash $h: lbscrypt's refusal left a device"
		ok "--hash $h: refused by both"
	fi
done
# lbscrypt's defaults are cryptsetup 2.7's: aes-xts-plain64, 256 bits, sha256
pass=$'default passphrase\n'
printf '%s' "$pass" | cryptsetup open --type plain --size 2048 --cipher aes-xts-plain64 --key-size 256 \
	--hash sha256 "$dev" lbs-cs || fail "cryptsetup open with 2.7's defaults spelled out failed"
c=$(dmsetup table --showkeys lbs-cs)
cryptsetup close lbs-cs
warn=$(printf '%s' "$pass" | lbscrypt open --type plain --size 2048 "$dev" lbs-tool 2>&1 >/dev/null) ||
	fail "lbscrypt open with the defaults failed: $warn"
l=$(dmsetup table --showkeys lbs-tool)
lbscrypt close lbs-tool
[ "$c" = "$l" ] || fail "defaults: lbscrypt '$l' is not cryptsetup 2.7's defaults '$c'"
grep -q 'WARNING' <<<"$warn" || fail "defaults with a passphrase: no warning (as 2.7 gives); stderr: $warn"
ok "defaults are cryptsetup 2.7's (aes-xts-plain64, 256 bits, sha256), with a warning"
same_key "key file" "" --key-file "$key" "${xts[@]}"
same_key "key file, --keyfile-offset 7 --keyfile-size 32, 256 bits" "" --key-file "$key" \
	--keyfile-offset 7 --keyfile-size 32 --key-size 256 --cipher aes-cbc-essiv:sha256
same_key "key file, --sector-size 4096 --iv-large-sectors --skip 8 --offset 16" "" --key-file "$key" \
	"${xts[@]}" --sector-size 4096 --iv-large-sectors --skip 8 --offset 16

# --- drop-in: identity, status, close and exit codes against cryptsetup ---
lbscrypt open -q --type plain --key-file "$key" "${xts[@]}" --sector-size 4096 --skip 16 \
	--size 2048 "$dev" lbs-tool || fail "lbscrypt open for the drop-in checks failed"
uuid=$(dmsetup info -c --noheadings -o uuid lbs-tool)
[ "$uuid" = CRYPT-PLAIN-lbs-tool ] || fail "DM UUID is '$uuid', cryptsetup sets CRYPT-PLAIN-lbs-tool"
if command -v lsblk >/dev/null; then
	t=$(lsblk -n -o TYPE /dev/mapper/lbs-tool) || fail "lsblk /dev/mapper/lbs-tool failed"
	[ "$t" = crypt ] || fail "lsblk shows TYPE '$t' for lbscrypt's mapping, expected crypt"
else
	fail "no lsblk in the guest (util-linux): cannot check TYPE crypt"
fi
cs=$(cryptsetup status lbs-tool) || fail "cryptsetup status on lbscrypt's mapping failed:$(printf '\n%s' "$cs")"
ls=$(lbscrypt status lbs-tool) || fail "lbscrypt status failed"
grep -qE '^  type: +PLAIN$' <<<"$cs" || fail "cryptsetup status does not see PLAIN:$(printf '\n%s' "$cs")"
n=$(wc -l <<<"$cs")
[ "$(head -n "$n" <<<"$ls")" = "$cs" ] ||
	fail "lbscrypt status does not begin with cryptsetup's lines:$(printf '\n--- cryptsetup\n%s\n--- lbscrypt\n%s' "$cs" "$ls")"
[ "$(lbscrypt status /dev/mapper/lbs-tool | head -n 1)" = "/dev/mapper/lbs-tool is active." ] ||
	fail "lbscrypt status /dev/mapper/lbs-tool does not find the mapping"
dmsetup suspend lbs-tool
cs=$(cryptsetup status lbs-tool) || true
ls=$(lbscrypt status lbs-tool) || true
dmsetup resume lbs-tool
grep -q '(suspended)' <<<"$ls" || fail "lbscrypt status does not flag a suspended mapping:$(printf '\n%s' "$ls")"
[ "$(head -n "$(wc -l <<<"$cs")" <<<"$ls")" = "$cs" ] ||
	fail "suspended: lbscrypt status does not begin with cryptsetup's lines:$(printf '\n--- cryptsetup\n%s\n--- lbscrypt\n%s' "$cs" "$ls")"
ok "lbscrypt's mapping: UUID $uuid, lsblk TYPE crypt, cryptsetup status agrees line for line (also suspended)"

# exit codes: open of an existing name (5), close and status of a missing mapping (4)
same_exit() {	# same_exit WHAT STDOUT? CMD-ARGS...: run `cryptsetup ARGS` and `lbscrypt ARGS`
	local what=$1 cmp_out=$2 c_rc=0 l_rc=0 c_out l_out
	shift 2
	c_out=$(cryptsetup "$@" 2>/dev/null </dev/null) || c_rc=$?
	l_out=$(lbscrypt "$@" 2>/dev/null </dev/null) || l_rc=$?
	[ "$c_rc" = "$l_rc" ] || fail "$what: cryptsetup exits $c_rc, lbscrypt $l_rc"
	[ "$c_rc" != 0 ] || fail "$what: both succeeded, expected a failure"
	[ "$cmp_out" = no ] || [ "$c_out" = "$l_out" ] || fail "$what: cryptsetup says '$c_out', lbscrypt '$l_out'"
	ok "$what: both exit $c_rc${l_out:+ ($l_out)}"
}
same_exit "open of an existing name" no open --type plain --key-file "$key" "${xts[@]}" --size 2048 "$dev" lbs-tool
cryptsetup close lbs-tool || fail "cryptsetup close of lbscrypt's mapping failed"
! dmsetup info lbs-tool >/dev/null 2>&1 || fail "cryptsetup close left lbscrypt's mapping"
ok "cryptsetup close removes lbscrypt's mapping"
same_exit "close of a missing mapping" no close lbs-tool
same_exit "status of a missing mapping" yes status lbs-tool
same_exit "status /dev/mapper/NAME of a missing mapping" yes status /dev/mapper/lbs-tool
same_exit "open of a missing device" no open --type plain --key-file "$key" "${xts[@]}" /dev/lbs-absent lbs-tool
! dmsetup info lbs-tool >/dev/null 2>&1 || fail "a failed open left a device"
lbscrypt open -q --type plain --key-file "$key" "${xts[@]}" --size 2048 "$dev" lbs-tool ||
	fail "lbscrypt open for the busy check failed"
exec 7</dev/mapper/lbs-tool
l_rc=0 c_rc=0
lbscrypt close lbs-tool 2>/dev/null || l_rc=$?
cryptsetup close lbs-tool 2>/dev/null || c_rc=$?
exec 7<&-
dmsetup info lbs-tool >/dev/null 2>&1 || fail "close of a mapping in use removed it"
if [ "$l_rc" != "$c_rc" ] || [ "$l_rc" = 0 ]; then
	fail "close of a mapping in use: lbscrypt exits $l_rc, cryptsetup $c_rc"
fi
lbscrypt close lbs-tool || fail "lbscrypt close after the holder went away failed"
ok "close of a mapping in use: both exit $l_rc, the mapping stays"

# a regular file: a loop device, detached again on close
img=/tmp/tool.img
dd if=/dev/zero of="$img" bs=64k count=16 status=none
on_exit rm -f "$img"
lbscrypt open -q --type plain --key-file "$key" "${xts[@]}" "$img" lbs-tool ||
	fail "lbscrypt open on the regular file $img failed"
loopdev=$(lbscrypt status lbs-tool | sed -n 's/^  device: *//p')
case $loopdev in /dev/loop*) ;; *) fail "a regular file is mapped through '$loopdev', not a loop device" ;; esac
lbscrypt status lbs-tool | grep -qE "^  loop: +$img$" || fail "lbscrypt status does not name $img as the loop's file"
pattern 65536 >/tmp/tool.small
put /tmp/tool.small /dev/mapper/lbs-tool 65536
[ "$(sha_of /dev/mapper/lbs-tool 65536 65536)" = "$(sha256sum </tmp/tool.small | cut -d' ' -f1)" ] ||
	fail "the data does not read back through the loop device"
lbscrypt close lbs-tool || fail "lbscrypt close of the file-backed mapping failed"
sleep 0.5
! [ -s "/sys/block/${loopdev#/dev/}/loop/backing_file" ] || fail "$loopdev still attached after close"
ok "regular file: $loopdev attached, data round trip, detached on close"

# numbers: no wrap-around; iv_offset on a sector boundary
for bad in "--size -1" "--skip -8" "--offset -2048" "--size 18446744073709551616" "--sector-size 4096 --skip 1"; do
	# shellcheck disable=SC2086 # the words are options
	if out=$(lbscrypt table --key-file "$key" $bad "$dev" 2>&1); then
		fail "lbscrypt table $bad succeeded: $out"
	fi
	[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "table $bad: the refusal is not one line: $out"
	ok "table $bad refused: $out"
done
