#!/usr/bin/env bash
# suite.sh TEST...: run several guest tests in one boot (boots cost ~30 s under
# TCG; tests/run-guest-tests groups them). Each TEST is tests/guest/TEST.sh run in
# its own bash; after each one a record the host runner reads:
#   LBS-RESULT <test> PASS|FAIL <seconds> [exit status]
# Exits non-zero when any test failed.
set -euo pipefail
here=$(dirname "$0")
failed=0
for t in "$@"; do
	start=$(date +%s)
	rc=0
	bash "$here/$t.sh" || rc=$?
	secs=$(($(date +%s) - start))
	if [ "$rc" = 0 ]; then
		printf 'LBS-RESULT %s PASS %s\n' "$t" "$secs"
	else
		printf 'LBS-RESULT %s FAIL %s exit %s\n' "$t" "$secs" "$rc"
		failed=1
	fi
	# a failed test may leave mappings behind; later tests need a clean slate
	dmsetup remove_all --force >/dev/null 2>&1 || true
done
exit "$failed"
