#!/usr/bin/env bash
# DESCRIPTION: lbscrypt benchmark through the guest kernel's AF_ALG
# BOOT: lbscrypt
# KERNELS: all -arm64-4k
#   arm64-4k in make check-full: arm64-4k-6.1 covers arm64's 4K pages,
#   arm64-16k Debian's 6.12 arm64 build
# FULL-KERNELS: all
# LIMIT: 120 ~20 s on arm64-64k, the engine's 20 ms a request included
# NEEDS: tool engine
# ORDER: 320
#
# tool-benchmark.sh: `lbscrypt benchmark` through the guest
# kernel's AF_ALG. Runs with any --module; the expected recommendation follows
# the crypt target loaded. Checks:
# - `--json` lists every unit size from 512 up to the page size, in order, each
#   with an encryption and a decryption throughput above 0 and one request per
#   unit (requests x unit = bytes);
# - its last record recommends the largest sector size the gate allows here
#   (the page size with crypt v1.30.0, else 4096) and says LUKS stays at 4096;
#   the text output ends with the same recommendation;
# - a cipher AF_ALG cannot do (aes-cbc-lmk) is one line on stderr and exit 1;
# - on a 64K-page kernel, `--driver lbs-engine-xts-aes` (the emulated engine,
#   /lbs/kmod/lbs-engine.ko, a fixed latency per request): the engine counted
#   exactly the requests the tool reports (one per unit), and its throughput
#   at 65536 is above that at 4096 (16 times fewer requests for the same bytes);
#   on 7.x, whose AF_ALG serves no asynchronous driver, a one-line refusal instead.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

ko=$LBS_ENGINE_KO
drv='lbs-engine-xts-aes'
sysd=/sys/kernel/lbs_engine
out=/tmp/benchmark.json
errf=/tmp/benchmark.err

command -v lbscrypt >/dev/null || fail "no lbscrypt in the guest (build it: make -f tools/tools.mk tools tools-arm64)"
page=$(page_size)
top=$(bound)

# records: the per-unit records of $out; field NAME [FILE]: NAME of every record
records() { grep '"sector_size"' "$out"; }
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p"; }

# run_json ARGS...: lbscrypt benchmark --json ARGS into $out, which must be there
run_json() {
	lbscrypt benchmark --json "$@" >"$out" 2>"$errf" ||
		fail "lbscrypt benchmark --json $*: exit $?: $(cat "$errf")"
	[ -s "$out" ] || fail "lbscrypt benchmark --json $*: no output"
}

# check_records WHAT: the sizes, throughputs and request counts of $out
check_records() {
	local want='' s sizes line unit enc dec ereq dreq ebytes dbytes
	for ((s = 512; s <= top; s *= 2)); do want+="$s "; done
	sizes=$(records | field sector_size | tr '\n' ' ')
	[ "$sizes" = "$want" ] || fail "$1: unit sizes '$sizes', expected '$want' (512 up to the page size $page)"
	while IFS= read -r line; do
		unit=$(field sector_size <<<"$line")
		enc=$(field encrypt_mibps <<<"$line") dec=$(field decrypt_mibps <<<"$line")
		ereq=$(field encrypt_requests <<<"$line") dreq=$(field decrypt_requests <<<"$line")
		ebytes=$(field encrypt_bytes <<<"$line") dbytes=$(field decrypt_bytes <<<"$line")
		awk -v e="$enc" -v d="$dec" 'BEGIN { exit !(e > 0 && d > 0) }' ||
			fail "$1: unit $unit: throughput encrypt '$enc' decrypt '$dec' MiB/s, expected both > 0"
		{ [ "$((ereq * unit))" = "$ebytes" ] && [ "$((dreq * unit))" = "$dbytes" ]; } ||
			fail "$1: unit $unit: $ereq/$dreq requests for $ebytes/$dbytes bytes: not one request per unit"
	done < <(records)
	ok "$1: units $want each measured, throughput > 0, one request per unit"
}

# --- the CPU's cipher
printf 'crypt target: %s; page size %s\n' "$(target_version crypt)" "$page"
run_json --time 0.05
cat "$out"
check_records "aes-xts-plain64"
expect=4096
[ "$(target_version crypt)" != v1.30.0 ] || expect=$top
rec=$(grep '"recommended_sector_size"' "$out") || fail "no recommendation record in the JSON output"
[ "$(field recommended_sector_size <<<"$rec")" = "$expect" ] ||
	fail "recommended $(field recommended_sector_size <<<"$rec"), expected $expect (crypt $(target_version crypt), page size $page): $rec"
case $rec in *"LUKS stays at 4096"*) ;; *) fail "the recommendation does not say LUKS stays at 4096: $rec" ;; esac
ok "recommends $expect for crypt $(target_version crypt) on page size $page"

text=$(lbscrypt benchmark --time 0.02 2>&1) || fail "lbscrypt benchmark (text): exit $?: $text"
printf '%s\n' "$text"
grep -q "^Recommended sector size: $expect\\. " <<<"$text" ||
	fail "the text output does not end with 'Recommended sector size: $expect.'"
ok "the text output recommends $expect"

rc=0
lbscrypt benchmark -c aes-cbc-lmk >/dev/null 2>"$errf" || rc=$?
{ [ "$rc" = 1 ] && [ "$(wc -l <"$errf")" = 1 ] && grep -q "cannot be benchmarked through AF_ALG" "$errf"; } ||
	fail "aes-cbc-lmk: exit $rc, stderr '$(cat "$errf")'; expected exit 1 and one line saying AF_ALG cannot do it"
ok "aes-cbc-lmk is refused with one line, exit 1"

# --- the emulated engine, where a unit can be 16 times 4096
[ "$page" = 65536 ] || exit 0
[ -f "$ko" ] || fail "no $ko: the engine is not built for $(uname -r) (qemu/lib/build-engine)"
deps=$(modinfo -F depends "$ko" | tr ',' ' ')
# shellcheck disable=SC2086 # a list of module names
[ -z "$deps" ] || modprobe -a $deps
# shellcheck disable=SC2119 # the engine with its default parameters
load_engine
completed() { awk '$1 == "completed" { print $2 }' "$sysd/stats"; }
# the kernel's self-test of the new algorithm goes through the engine too: wait
# until /proc/crypto says it passed (the registered entry, not a larval's) and
# the engine is idle, so the count below is the tool's alone
for _ in $(seq 1 100); do
	awk -v d="$drv" '$1 == "driver" { cur = $3 } $1 == "module" { mod = $3 }
		$1 == "selftest" && cur == d && mod == "lbs_engine" && $3 == "passed" { f = 1 }
		END { exit !f }' /proc/crypto && break
	sleep 0.2
done
idle=$(completed)
for _ in $(seq 1 60); do
	sleep 0.5
	[ "$(completed)" != "$idle" ] || break
	idle=$(completed)
done
# Linux 7.x's AF_ALG serves synchronous software ciphers only ("crypto: af_alg -
# Drop support for off-CPU cryptography"): there, the engine is registered (above)
# and the tool says in one line why AF_ALG cannot reach it and what to do instead.
if [ "$(uname -r | cut -d. -f1)" -ge 7 ]; then
	rc=0
	lbscrypt benchmark --driver "$drv" --time 0.1 >/dev/null 2>"$errf" || rc=$?
	{ [ "$rc" = 1 ] && [ "$(wc -l <"$errf")" = 1 ] && grep -q "is an asynchronous (offload) driver" "$errf" &&
		grep -q "through a mapping" "$errf"; } ||
		fail "$drv on $(uname -r): exit $rc, stderr '$(cat "$errf")'; expected exit 1 and one line saying AF_ALG serves no asynchronous driver here"
	ok "$drv on $(uname -r): AF_ALG serves no asynchronous driver; the tool says so in one line: $(cat "$errf")"
	exit 0
fi
before=$(completed)
run_json --driver "$drv" --time 0.1
cat "$out"
check_records "--driver $drv"
reqs=0
while read -r e d; do reqs=$((reqs + e + d)); done < <(paste -d ' ' <(records | field encrypt_requests) <(records | field decrypt_requests))
[ "$(($(completed) - before))" = "$reqs" ] ||
	fail "the engine completed $(($(completed) - before)) requests, the tool reports $reqs: not one request per unit through $drv"
# at UNIT: the encryption throughput at UNIT
at() { records | grep -E "\"sector_size\":$1[,}]" | field encrypt_mibps; }
e4=$(at 4096) e64=$(at 65536)
awk -v a="$e64" -v b="$e4" 'BEGIN { exit !(a > b) }' ||
	fail "$drv: encrypt at 65536 is $e64 MiB/s, at 4096 $e4 MiB/s: a fixed latency per request should favour the larger unit"
ok "$drv: $reqs requests, one per unit; encrypt $e4 MiB/s at 4096, $e64 MiB/s at 65536"
