#!/usr/bin/env bash
# DESCRIPTION: runs the guest tests of one boot, each under its time limit (the framework)
#
# common/suite.sh TEST[:SECONDS]...: run several guest tests in one boot (boots
# cost ~30 s under TCG; tests/run-guest-tests groups them). Each TEST is
# tests/guest/TEST.sh; a TEST with a slash is that path below tests/guest
# (halves/faults: make harden's) or, given as an absolute path, that script;
# either is named by its base name. Each runs in its own bash and its own
# session, under a time limit: its header's LIMIT, or SECONDS. Before and after
# each one, records the host runner reads:
#   LBS-START <test> <limit>
#   LBS-RESULT <test> PASS|FAIL <seconds> [exit <status> | timeout <limit> | kernel-report]
# A test still running at its limit is killed with everything it started (TERM,
# then KILL 10 s later), reported with a FAIL line naming it and its limit, and
# counted as failed; the next test runs. Exits non-zero when any test failed.
#
# The kernel's own reports of a bug (a WARN, a BUG or KASAN report, a lockdep
# splat, a sleep in atomic context, a debug-objects report, a hung task, UBSAN)
# stay off the guests' console (loglevel=1), so suite.sh reads the kernel log as
# it is written and, after each test, prints every such record of the test's time
# as "KERNEL-SPLAT <message>" with the records after it as "KERNEL-LOG <message>",
# and fails the test (the first test's time begins at boot: module loads count).
#
# suite.sh --limits TEST[:SECONDS]...: print "TEST LIMIT" for each (the host
# runner sums them into the boot's budget); runs nothing.
set -euo pipefail
here=$(dirname "$0")	# tests/guest/common
tests=$here/..	# tests/guest

# default_limit TEST: seconds TEST may run before it is killed: its header's
# "# LIMIT: SECONDS why" line (tests/README); a test without one is refused.
default_limit() {
	local script=$tests/$1.sh limit
	case $1 in /*) script=$1 ;; esac
	[ -f "$script" ] || { echo "suite.sh: $1: no such test ($script)" >&2; return 2; }
	# the header: the comment lines after the shebang
	limit=$(awk 'NR > 1 && !/^#/ { exit } /^# LIMIT: / { print $3; exit }' "$script")
	[ -n "$limit" ] || { echo "suite.sh: $script has no '# LIMIT: SECONDS why' header line" >&2; return 2; }
	printf '%s\n' "$limit"
}

# limit_of TEST[:SECONDS]: the limit of one argument, checked.
limit_of() {
	local t=${1%%:*} limit
	if [ "$1" = "$t" ]; then limit=$(default_limit "$t") || return 2; else limit=${1#*:}; fi
	case $limit in
	'' | *[!0-9]*) echo "suite.sh: $1: the limit must be a number of seconds" >&2; return 2 ;;
	esac
	printf '%s\n' "$limit"
}

if [ "${1:-}" = --limits ]; then
	shift
	for spec in "$@"; do
		limit=$(limit_of "$spec")
		printf '%s %s\n' "${spec%%:*}" "$limit"
	done
	exit 0
fi

# run_limited LIMIT SCRIPT: run SCRIPT with bash in a session of its own (setsid
# from util-linux; busybox's timeout would signal the script alone, leaving the
# fio or dd it started running), wait at most LIMIT seconds, then kill the whole
# session. Returns the script's status, or 124 with timed_out=1 when killed.
run_limited() {
	local limit=$1 script=$2 pid timer done_pid='' rc=0
	timed_out=0
	setsid bash "$script" &
	pid=$!
	sleep "$limit" &
	timer=$!
	wait -n -p done_pid "$pid" "$timer" || rc=$?
	if [ "$done_pid" = "$pid" ]; then
		kill "$timer" 2>/dev/null || true
		wait "$timer" 2>/dev/null || true
		return "$rc"
	fi
	timed_out=1
	kill -TERM -- "-$pid" 2>/dev/null || true
	sleep 10 &
	timer=$!
	wait -n -p done_pid "$pid" "$timer" || true
	if [ "$done_pid" != "$pid" ]; then
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	kill -KILL -- "-$pid" 2>/dev/null || true # what outlived the script
	kill "$timer" 2>/dev/null || true
	wait "$timer" 2>/dev/null || true
	return 124
}

# scsi_debug from the host where the kernel lacks it
bash "$here/scsi-debug-module.sh"

# The kernel log, as it is written: a reader of /dev/kmsg gets every record from
# the oldest still held, whatever the tests' `dmesg -c` clears for their own
# checks. GNU dd copies one record per read and goes on past EPIPE (records
# overwritten before they were read).
klog=/tmp/suite-kmsg.log
klog_seen=0
: >"$klog"
dd if=/dev/kmsg of="$klog" bs=64k conv=noerror status=none 2>/dev/null &
klog_pid=$!
trap 'kill "$klog_pid" 2>/dev/null || true' EXIT

# kernel_reports: print the kernel's bug reports logged since the last call
# (above); returns 1 when there was one.
kernel_reports() {
	local size rc=0
	sleep 1 # what the test's last moments logged reaches the file
	size=$(stat -c %s "$klog")
	# the file grows meanwhile: head reads to the size taken, tail drops what was seen
	head -c "$size" "$klog" | tail -c +"$((klog_seen + 1))" | awk '
		# a record: "level,seq,usec,flags;message"; dictionary lines begin with a space
		/^ / { next }
		{
			i = index($0, ";")
			if (!i) next
			msg = substr($0, i + 1)
			if (msg ~ /^(WARNING: |BUG: |UBSAN: |ODEBUG: |kernel BUG at |Internal error: |Unable to handle kernel )/ ||
			    msg ~ /^INFO: task .* blocked for more than /) {
				print "KERNEL-SPLAT " msg
				context = 15
				found = 1
			} else if (context > 0) {
				print "KERNEL-LOG " msg
				context--
			}
		}
		END { exit found ? 1 : 0 }' || rc=1
	klog_seen=$size
	# a reader that ended would leave this check blind: that fails too
	if ! kill -0 "$klog_pid" 2>/dev/null; then
		echo "KERNEL-SPLAT (suite.sh's kernel log reader has ended: no report after this can be seen)"
		rc=1
	fi
	return "$rc"
}

failed=0
for spec in "$@"; do
	t=${spec%%:*}
	# a path runs that script (the rig's own tests: tests/qemu-run-test; make
	# harden's halves/NAME), named by its base name
	script=$tests/$t.sh
	case $t in /*) script=$t ;; esac
	t=$(basename "$t" .sh)
	rc=0 timed_out=0
	# no such test, or no LIMIT in its header: a failure of its own, named
	limit=$(limit_of "$spec" 2>&1) || rc=$?
	[ "$rc" = 0 ] || why=$limit limit=0
	printf 'LBS-START %s %s\n' "$t" "$limit"
	start=$SECONDS
	if [ "$rc" = 0 ]; then
		run_limited "$limit" "$script" || rc=$?
	else
		printf 'FAIL %s.sh: %s\n' "$t" "$why"
	fi
	secs=$((SECONDS - start))
	reported=0
	kernel_reports || reported=1
	if [ "$reported" = 1 ]; then
		printf 'FAIL %s.sh: kernel report: the kernel logged a bug report during the test (KERNEL-SPLAT lines above)\n' "$t"
	fi
	if [ "$timed_out" = 1 ]; then
		printf 'FAIL %s.sh: still running after its limit of %ss: killed (limit: the LIMIT of its header, or %s:SECONDS)\n' \
			"$t" "$limit" "$t"
		printf 'LBS-RESULT %s FAIL %s timeout %s\n' "$t" "$secs" "$limit"
		failed=1
	elif [ "$rc" = 0 ] && [ "$reported" = 1 ]; then
		printf 'LBS-RESULT %s FAIL %s kernel-report\n' "$t" "$secs"
		failed=1
	elif [ "$rc" = 0 ]; then
		printf 'LBS-RESULT %s PASS %s\n' "$t" "$secs"
	else
		printf 'LBS-RESULT %s FAIL %s exit %s\n' "$t" "$secs" "$rc"
		failed=1
	fi
	# a failed test may leave mappings behind; later tests need a clean slate
	dmsetup remove_all --force >/dev/null 2>&1 || true
done
exit "$failed"
