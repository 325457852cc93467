#!/usr/bin/env bash
# DESCRIPTION: lbscrypt with the stock dm_crypt as crypt: the version refusal, 4096 works
# BOOT: both
# BOOT: stock arm64-64k
#   --module stock (stock alone) on arm64-64k, where the page allows more than 4096
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: tool
# ORDER: 900
#
# toolstock.sh: lbscrypt with the stock dm_crypt as `crypt`. Runs under `--module stock` (on arm64-64k) and under
# `--module both` (stock is `crypt` there too).
# - where the page allows more than 4096: `lbscrypt open --sector-size <page>`
#   is refused with the version message (crypt is v1.28.0, needs v1.30.0), a
#   one-line error, non-zero exit, no device; `lbscrypt check` says the same.
# - on every kernel: the refusal above 4096 happens, and `lbscrypt open` at 4096
#   works through stock (the tool still serves the old target within its limits).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools tools-arm64)"
v=$(target_version crypt)
case $v in v1.30.0 | "") fail "crypt is '$v'; this test needs the stock target as crypt" ;; esac
on_exit lbscrypt close lbs-tool
key=/tmp/tool.key
head -c 64 /dev/urandom >"$key"
page=$(page_size)
size=$(bound)
[ "$size" -gt 4096 ] || size=8192

if out=$(lbscrypt open --type plain --key-file "$key" --key-size 512 --sector-size "$size" \
	--size 2048 "$dev" lbs-tool 2>&1); then
	fail "lbscrypt open --sector-size $size with stock crypt $v succeeded"
fi
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "--sector-size $size: the refusal is not one line: $out"
! dmsetup info lbs-tool >/dev/null 2>&1 || fail "--sector-size $size: a device was created"
if [ "$page" -gt 4096 ]; then
	{ grep -q "${v#v}" <<<"$out" && grep -q "1.30.0" <<<"$out"; } ||
		fail "--sector-size $size on crypt $v: the refusal does not name the versions: $out"
	chk=$(lbscrypt check --sector-size "$size" 2>&1 || true)
	grep -q "1.30.0" <<<"$chk" || fail "lbscrypt check --sector-size $size does not name v1.30.0: $chk"
fi
ok "lbscrypt open --sector-size $size with stock crypt $v: refused, no device: $out"

lbscrypt open --type plain --key-file "$key" --key-size 512 --sector-size 4096 --size 2048 "$dev" lbs-tool ||
	fail "lbscrypt open --sector-size 4096 with stock crypt $v failed"
grep -q "sector_size:4096" <<<"$(dmsetup table lbs-tool)" || fail "the 4096 table is $(dmsetup table lbs-tool)"
lbscrypt close lbs-tool
ok "lbscrypt open --sector-size 4096 with stock crypt $v works"
