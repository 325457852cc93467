#!/usr/bin/env bash
# DESCRIPTION: the table and message fuzzer's guest side (qemu/lib/fuzz-run: make harden, make fuzz-check)
#
# fuzz.sh CASES DMFUZZ [both|ours|stock]: the table and message fuzzer's guest side. Needs ours as crypt_lbs beside stock as crypt (`qemu/run KERNEL
# --module both`) and /dev/ram0 of the size the cases were made for. Runs every case
# of CASES (qemu/lib/fuzz_tables.py) through DMFUZZ (tests/harden/dmfuzz.c) against
# ours, then the same cases against stock, except those marked stock-unsafe (a key
# size above 16384 makes stock try the allocation and WARN), with sector sizes
# above 4096 lowered to 4096 for stock (see below). Prints dmfuzz's CASE
# lines and, at the end, one line `FUZZ-SUMMARY {json}`; tests/harden/fuzz_judge.py
# judges them. "ours" or "stock" runs one pass only (make harden runs ours on the
# debug kernel and stock on the same source's plain build: stock's answers do not
# depend on debug options, and the debug kernel's time is better spent on ours).
# Fails when dmfuzz did not get through a file, a device was left
# behind, or the kernel logged a WARNING/BUG.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

[ $# -eq 2 ] || [ $# -eq 3 ] || fail "usage: fuzz.sh CASES DMFUZZ [both|ours|stock]"
which=${3:-both}
case $which in both | ours | stock) ;; *) fail "fuzz.sh: the pass must be both, ours or stock, not '$which'" ;; esac
cases=$1
[ -f "$cases" ] || fail "case file $cases: not found"
[ -f "$2" ] || fail "dmfuzz binary $2: not found"
dmfuzz=/tmp/dmfuzz
cp "$2" "$dmfuzz"
chmod +x "$dmfuzz"
on_exit rm -f /tmp/fuzz.stock /tmp/fuzz.ours.out /tmp/fuzz.stock.out

ours_v=$(target_version crypt_lbs)
stock_v=$(target_version crypt)
[ -n "$ours_v" ] || fail "target crypt_lbs is not registered: boot with --module both"
[ -n "$stock_v" ] || fail "target crypt (stock dm-crypt) is not registered: boot with --module both"
[ -b /dev/ram0 ] || fail "/dev/ram0 is missing"
printf 'fuzz: ours crypt_lbs %s, stock crypt %s, /dev/ram0 %s bytes, %s cases\n' \
	"$ours_v" "$stock_v" "$(blockdev --getsize64 /dev/ram0)" "$(grep -vc '^#' "$cases" || true)"

# Stock gets every case but the stock-unsafe ones; a case with a sector size above
# 4096 (flag ss>4096) goes to stock as its twin with sector_size:4096, so stock's
# verdict on the rest of the table (its errno, its messages) can still be compared.
awk -F'\t' -v OFS='\t' '
	/^#/ { print; next }
	$4 ~ /(^|,)stock-unsafe(,|$)/ { next }
	$4 ~ /(^|,)ss>4096(,|$)/ { gsub(/sector_size:(8192|16384|32768|65536)/, "sector_size:4096", $7) }
	{ print }' "$cases" >/tmp/fuzz.stock

# Two settings that make the cases cheaper without changing any verdict (the
# budget of `make harden`): expedited RCU grace periods (each load,
# resume and remove waits for some under TCG), and no modprobe when the kernel has
# no crypto or device-mapper modules to load (the rig's own kernels build them in;
# dm-crypt is loaded already): every unknown cipher or target name otherwise
# spawns a modprobe that can only fail, 0.3-1.5 s each under emulation.
if [ -w /sys/kernel/rcu_expedited ]; then
	echo 1 >/sys/kernel/rcu_expedited
	on_exit sh -c 'echo 0 >/sys/kernel/rcu_expedited'
fi
mods=/lib/modules/$(uname -r)/kernel
if [ -z "$(find "$mods/crypto" "$mods/arch" -name '*.ko*' 2>/dev/null | head -n 1)" ] &&
	[ -z "$(find "$mods/drivers/md" -name '*.ko*' ! -name 'dm-crypt.ko*' 2>/dev/null | head -n 1)" ]; then
	modprobe_was=$(cat /proc/sys/kernel/modprobe)
	on_exit sh -c "echo '$modprobe_was' >/proc/sys/kernel/modprobe"
	echo >/proc/sys/kernel/modprobe
	printf 'fuzz: module autoloading off (no crypto or device-mapper modules here)\n'
fi

# run_one FILE TARGET OUT: dmfuzz over FILE as TARGET, CASE lines to stdout and OUT
run_one() {
	local start end
	start=$(date +%s)
	"$dmfuzz" "$1" "$2" | tee "$3"
	end=$(date +%s)
	grep -q '^DMFUZZ-DONE ' "$3" || fail "dmfuzz did not finish $1 as $2 (no DMFUZZ-DONE line)"
	printf 'fuzz: %s: %s cases in %s s\n' "$2" "$(grep -c '^CASE ' "$3" || true)" "$((end - start))"
	secs_total=$((secs_total + end - start))
}
secs_total=0
: >/tmp/fuzz.ours.out
: >/tmp/fuzz.stock.out
[ "$which" = stock ] || run_one "$cases" crypt_lbs /tmp/fuzz.ours.out
[ "$which" = ours ] || run_one /tmp/fuzz.stock crypt /tmp/fuzz.stock.out

left=$(dmsetup ls 2>/dev/null | grep -c '^fz-' || true)
[ "$left" -eq 0 ] || soft_fail "$left fz- devices were left behind: $(dmsetup ls | grep '^fz-' | head -n 5 | tr '\n' ' ')"
warns=$(dmesg | grep -cE 'WARNING:|BUG:|Call trace:|Call Trace:' || true)
[ "$warns" -eq 0 ] || { dmesg | grep -E -A20 'WARNING:|BUG:' | head -n 60; soft_fail "the kernel logged $warns WARNING/BUG/call-trace lines"; }
count() { grep -c "$1" "$2" || true; }
printf 'FUZZ-SUMMARY {"ours_cases": %s, "ours_loaded": %s, "stock_cases": %s, "stock_loaded": %s, "stock_skipped": %s, "devices_left": %s, "kernel_warnings": %s, "seconds": %s, "page_size": "%s", "kernel": "%s"}\n' \
	"$(count '^CASE ' /tmp/fuzz.ours.out)" "$(count ' load=OK ' /tmp/fuzz.ours.out)" \
	"$(count '^CASE ' /tmp/fuzz.stock.out)" "$(count ' load=OK ' /tmp/fuzz.stock.out)" \
	"$(if [ "$which" = ours ]; then echo 0; else echo $(($(grep -vc '^#' "$cases" || true) - $(grep -vc '^#' /tmp/fuzz.stock || true))); fi)" \
	"$left" "$warns" "$secs_total" "$(page_size)" "$(uname -r)"
