#!/usr/bin/env bash
# DESCRIPTION: kmemleak finds nothing this module allocated and lost (make harden)
#   qemu/harden runs it last in each boot of the debug kernel
# LIMIT: 120 about four times the longest expected (5 to 25 s on arm64-64k, idle)
# NEEDS: debug-kernel
#
# leakscan.sh: kmemleak finds nothing this module allocated and lost. For make harden, last in each boot of the debug kernel (kmemleak):
# removes every mapping of ours, unloads nothing, asks kmemleak for two scans
# (an object must be unreferenced in two scans to be reported) and prints every
# suspect whose allocation backtrace passes through this module, then
# "LEAKS ours=N other=N". Other suspects are listed, not counted as ours: the
# kernel under emulation reports a few of its own.
set -euo pipefail
# shellcheck source=tests/guest/common/lib.sh
. "$(dirname "$0")/../common/lib.sh"

dbg=/sys/kernel/debug
[ -e "$dbg/kmemleak" ] || mount -t debugfs nodev "$dbg" 2>/dev/null || true
[ -w "$dbg/kmemleak" ] || fail "no $dbg/kmemleak: the kernel has no kmemleak (arm64-64k-debug has)"
for d in $(dmsetup ls --target crypt_lbs 2>/dev/null | awk '$1 != "No" { print $1 }'); do
	dm_remove "$d"
done
echo scan >"$dbg/kmemleak"
sleep 6
echo scan >"$dbg/kmemleak"
cat "$dbg/kmemleak" >/tmp/leaks.txt
ours=$(awk '/^unreferenced object/ { if (n) print o; o = 0; n = 1 } /lbs_|dm_crypt_lbs|crypt_lbs/ { o = 1 } END { if (n) print o }' /tmp/leaks.txt | grep -c 1 || true)
all=$(grep -c '^unreferenced object' /tmp/leaks.txt || true)
if [ "$ours" -gt 0 ]; then
	cat /tmp/leaks.txt
	printf 'LEAKS ours=%s other=%s\n' "$ours" "$((all - ours))"
	fail "kmemleak: $ours unreferenced objects allocated through this module (above)"
fi
[ "$all" = 0 ] || { sed -n '1,40p' /tmp/leaks.txt; }
ok "kmemleak: no leak through this module ($all other suspects)"
printf 'LEAKS ours=%s other=%s\n' "$ours" "$((all - ours))"
