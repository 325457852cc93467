#!/usr/bin/env bash
# DESCRIPTION: no_read_workqueue, no_write_workqueue, submit_from_crypt_cpus do what dm-crypt's do
# BOOT: both
# KERNELS: arm64-64k arm64-4k-6.1 arm64-64k-7.3
#   the largest sector (64K), the oldest completion API (6.1), and 7.3
# FULL-KERNELS: all
# LIMIT: 300 5 traced runs, then 4 runs per asynchronous cipher
# NEEDS: engine ftrace cryptd
# MAY-LACK: cryptd arm64-16k arm64-4k arm64-4k-6.1
#   Debian's arm64 kernels are built without CONFIG_CRYPTO_CRYPTD: the
#   asynchronous case is skipped there
# ORDER: 140
#
# inline.sh: the options no_read_workqueue, no_write_workqueue and
# submit_from_crypt_cpus do what dm-crypt's do, and data stays right with each.
# Needs ours as crypt_lbs (`--module both`).
# With the CPU cipher, for each set of options at the largest sector size: fio
# randrw with crc32c verification, errors fatal, while ftrace
# counts the calls of the functions that only the deferred paths run, and
# checks the option changed where the work is done:
#   default                 reads decrypted in crypt_wq (lbs_read_crypt_work),
#                           writes encrypted in crypt_wq (lbs_write_crypt_work)
#                           and submitted by the writer thread (lbs_queue_write)
#   no_read_workqueue       no lbs_read_crypt_work: decrypted in the completion
#   no_write_workqueue      no lbs_write_crypt_work, no lbs_queue_write
#   submit_from_crypt_cpus  lbs_write_crypt_work, but no lbs_queue_write
# Then each asynchronous cipher the kernel has (cryptd; the emulated engine with a
# queue of 2, so requests are backlogged in the completion context) with each
# option set at the largest size, and no_read_workqueue at 512: fio verified, and
# no WARNING (a sleep in the completion context would be one).
# A kernel without cryptd skips that cipher (LBS-SKIP).
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/common/lib.sh"

dev=/dev/ram0
key=$(test_key 64)
len=$((8 << 11))	# 8 MiB
tr=/sys/kernel/tracing
on_exit dm_remove lbs-in
on_exit sh -c "echo nop >$tr/current_tracer; echo >$tr/set_ftrace_filter"

[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null || true
[ -w "$tr/set_ftrace_filter" ] || fail "no function tracer in $tr (CONFIG_FUNCTION_TRACER): the placement checks need it"
funcs=(lbs_read_crypt_work lbs_write_crypt_work lbs_queue_write)
printf '%s\n' "${funcs[@]}" >"$tr/set_ftrace_filter" ||
	fail "ftrace cannot filter on ${funcs[*]} (are they in $tr/available_filter_functions?)"

# calls FUNC: how often FUNC ran since the trace was cleared
calls() {
	grep -c " $1 <-" "$tr/trace" || true
}

# run SPEC SS OPTS...: a mapping with OPTS, fio randrw verified
run() {
	local spec=$1 ss=$2 opts=("${@:3}") n
	[ "$ss" = 512 ] || opts+=("sector_size:$ss")
	n=${#opts[@]}
	dmsetup create lbs-in --table "0 $len crypt_lbs $spec $key 0 $dev 0${n:+ $n ${opts[*]}}" ||
		fail "$spec ss=$ss ${opts[*]}: refused: $(ti_error)"
	if ! fio_ok /tmp/in.fio --name=in --filename="$(dm_blkdev lbs-in)" --rw=randrw --bs="$((ss > 4096 ? ss : 4096))" \
		--direct=1 --ioengine=libaio --iodepth=16 --numjobs=2 --size="${size:-2m}" --offset_increment=2m \
		--verify=crc32c --verify_fatal=1 --randrepeat=1; then
		cat /tmp/in.fio
		fail "$spec ss=$ss ${opts[*]}: fio randrw with verification failed"
	fi
	dm_remove lbs-in
}

# traced OPTS...: the CPU cipher with OPTS at the largest size, traced; sets r w q
traced() {
	echo function >"$tr/current_tracer"
	echo >"$tr/trace"
	echo 1 >"$tr/tracing_on"
	run aes-xts-plain64 "$(bound)" "$@"
	# stop, read, then drop the tracer (changing the tracer empties the buffer)
	echo 0 >"$tr/tracing_on"
	r=$(calls lbs_read_crypt_work) w=$(calls lbs_write_crypt_work) q=$(calls lbs_queue_write)
	echo nop >"$tr/current_tracer"
}

# want COUNT EXPECT: EXPECT is 0 (never ran), + (ran) or * (either)
want() {
	case $2 in
	0) [ "$1" = 0 ] ;;
	+) [ "$1" -gt 0 ] ;;
	*) true ;;
	esac
}

# check OPTS WHAT R W Q: after traced OPTS, the counts must be as R W Q say (want)
check() {
	if want "$r" "$3" && want "$w" "$4" && want "$q" "$5"; then
		ok "aes-xts-plain64 ${1:-(no options)}: $2 (read work $r, write work $w, writer queue $q); fio verified"
	else
		soft_fail "aes-xts-plain64 ${1:-(no options)}: expected $2 (read work $3, write work $4, writer queue $5), observed read work $r, write work $w, writer queue $q"
	fi
}

traced
check "" "reads and writes in crypt_wq, writes via the writer thread" + + +
traced no_read_workqueue
check no_read_workqueue "reads decrypted in the completion" 0 + +
traced no_write_workqueue
check no_write_workqueue "writes encrypted and submitted by the submitter" + 0 0
traced submit_from_crypt_cpus
check submit_from_crypt_cpus "writes submitted by the crypt worker" '*' + 0
traced no_read_workqueue no_write_workqueue
check "no_read_workqueue no_write_workqueue" "no work item and no writer thread" 0 0 0

# the asynchronous ciphers, where the kernel has them
ciphers=()
cryptd=$(cryptd_spec crypt_lbs "$dev" "$key")
if [ -n "$cryptd" ]; then
	ciphers+=("$cryptd")
else
	skip_lacking cryptd "cryptd(xts)" "cryptd(xts) does not load"
fi
load_engine queue_depth=2 channels=1 latency_us=200
ciphers+=("capi:lbs-engine-xts-aes-plain64")
dmesg -c >/dev/null
# the default placement of the async case is the engine test's and fio's; here the
# options, and 512 (many small requests, the backlog hit in the completion) once
for spec in "${ciphers[@]}"; do
	size=1m run "$spec" 512 no_read_workqueue
	ok "$spec no_read_workqueue: fio randrw verified at 512"
	for opts in "no_read_workqueue" "no_read_workqueue no_write_workqueue" "submit_from_crypt_cpus"; do
		# shellcheck disable=SC2086 # the options are words
		size=1m run "$spec" "$(bound)" $opts
		ok "$spec $opts: fio randrw verified at $(bound)"
	done
done
if dmesg | grep -E 'WARNING:|BUG:|sleeping function called'; then
	fail "the kernel warned (above)"
fi
