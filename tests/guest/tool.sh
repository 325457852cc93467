#!/usr/bin/env bash
# tool.sh: the lbscrypt tool against dm-crypt-lbs loaded as `crypt` (issue 4,
# guest tests). Needs `--module lbscrypt`.
# - `lbscrypt open --type plain --sector-size <largest here>` works (65536 on a
#   64K-page kernel), the table and the block size say so, data round-trips,
#   `lbscrypt status` reports it, `lbscrypt close` removes it; the raw bytes go to
#   the host's reference check (REFERENCE lines).
# - a sector size above the page size is refused (one line, non-zero exit, no
#   device), on 4K kernels that is 8192.
# - the same passphrase (stdin, --hash sha256 and the default hash) and the same
#   key file (with --keyfile-offset/--keyfile-size) give the same key and table in
#   `lbscrypt open` as in `cryptsetup open --type plain` (dmsetup table --showkeys).
set -euo pipefail
# shellcheck source=tests/guest/lib.sh
. "$(dirname "$0")/lib.sh"

dev=/dev/ram0
bytes=$((1 << 20))
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools tools-arm64)"
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
# cipher and key size always given: the tools' defaults differ by design
# (cryptsetup 2.6 plain: aes-cbc-essiv:sha256/256, lbscrypt: aes-xts-plain64/256)
xts=(--cipher aes-xts-plain64 --key-size 512)
same_key "passphrase on stdin, --hash sha256" $'correct horse battery staple\n' --hash sha256 "${xts[@]}"
same_key "passphrase on stdin, --hash sha512, aes-cbc-essiv:sha256 256 bits" $'p4ss w0rd\n' \
	--hash sha512 --cipher aes-cbc-essiv:sha256 --key-size 256
same_key "passphrase on stdin, the default hash (ripemd160)" $'another passphrase\n' "${xts[@]}"
same_key "key file" "" --key-file "$key" "${xts[@]}"
same_key "key file, --keyfile-offset 7 --keyfile-size 32, 256 bits" "" --key-file "$key" \
	--keyfile-offset 7 --keyfile-size 32 --key-size 256 --cipher aes-cbc-essiv:sha256
same_key "key file, --sector-size 4096 --iv-large-sectors --skip 8 --offset 16" "" --key-file "$key" \
	"${xts[@]}" --sector-size 4096 --iv-large-sectors --skip 8 --offset 16
