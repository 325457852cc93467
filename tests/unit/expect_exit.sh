#!/bin/sh
# expect_exit.sh CODE REGEX CMD...: runs CMD, fails unless it exits with CODE and its
# combined output matches the extended REGEX.
set -u
expected=$1
pattern=$2
shift 2
output=$("$@" 2>&1)
rc=$?
printf '%s\n' "$output"
if [ "$rc" -ne "$expected" ]; then
	echo "FAIL: exit status $rc, expected $expected" >&2
	exit 1
fi
if ! printf '%s\n' "$output" | grep -Eq -- "$pattern"; then
	echo "FAIL: output does not match: $pattern" >&2
	exit 1
fi
