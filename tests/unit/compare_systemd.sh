#!/bin/bash
# compare_systemd.sh LBSCRYPT FILE: LBSCRYPT's generator and systemd's own
# systemd-cryptsetup-generator on the same FILE (an lbscrypttab whose every line systemd takes
# as a crypttab line). For each volume, the lines that name what it waits for and what runs
# after it opens must be the same: BindsTo=, Requires=, RequiresMountsFor=, After= on a device
# or the random seed, Before= on the targets, ExecStartPost=; and so must the links that pull
# it in (the targets' and /dev/mapper/NAME's .requires/.wants). The other lines differ by
# design (the program, its module, the descriptions).
# Exit 77 (skipped) where systemd's generator is not installed.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: compare_systemd.sh LBSCRYPT FILE" >&2; exit 2; }
tool=$(realpath "$1") file=$(realpath "$2")
systemd=
for candidate in /lib/systemd/system-generators/systemd-cryptsetup-generator \
	/usr/lib/systemd/system-generators/systemd-cryptsetup-generator; do
	[ -x "$candidate" ] && { systemd=$candidate; break; }
done
[ -n "$systemd" ] || { echo "no systemd-cryptsetup-generator: skipped"; exit 77; }
makefs=/lib/systemd/systemd-makefs
[ -e "$makefs" ] || makefs=/usr/lib/systemd/systemd-makefs

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ours" "$work/theirs"
"$tool" generate-units --tab "$file" --cmdline /dev/null --makefs "$makefs" "$work/ours"
SYSTEMD_CRYPTTAB=$file SYSTEMD_PROC_CMDLINE='' "$systemd" "$work/theirs" "$work/theirs" "$work/theirs"

# The lines compared, of one unit file, sorted.
dependencies() {
	grep -E '^(BindsTo|Requires|RequiresMountsFor)=|^After=(dev-|systemd-random-seed)|^Before=(cryptsetup|remote-cryptsetup|umount)\.target|^ExecStartPost=' "$1" | sort
}
# The links under a tree, with systemd's unit name as ours.
links() {
	(cd "$1" && find . -type l | sed 's|systemd-cryptsetup@|lbscrypt@|' | sort)
}

failed=0
volumes=0
for theirs in "$work"/theirs/systemd-cryptsetup@*.service; do
	unit=${theirs##*/systemd-cryptsetup@}
	ours=$work/ours/lbscrypt@$unit
	volumes=$((volumes + 1))
	if [ ! -f "$ours" ]; then
		echo "$unit: systemd wrote a unit, lbscrypt none" >&2
		failed=1
		continue
	fi
	if ! diff <(dependencies "$theirs") <(dependencies "$ours") >"$work/diff"; then
		echo "$unit: differs from systemd's (< systemd, > lbscrypt):" >&2
		cat "$work/diff" >&2
		failed=1
	fi
done
if ! diff <(links "$work/theirs") <(links "$work/ours") >"$work/diff"; then
	echo "links differ from systemd's (< systemd, > lbscrypt):" >&2
	cat "$work/diff" >&2
	failed=1
fi
want=$(grep -cvE '^(#|$)' "$file")
if [ "$volumes" -ne "$want" ]; then
	echo "systemd wrote $volumes units for $want lines" >&2
	failed=1
fi
[ "$failed" -ne 0 ] || echo "$volumes volumes: the same dependencies as $systemd"
exit "$failed"
