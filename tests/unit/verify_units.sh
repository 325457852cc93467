#!/bin/bash
# verify_units.sh LBSCRYPT DATA: the generator's golden trees, DATA/generator*/expected, checked
# against the generator and against systemd.
#   - Where a case has an lbscrypttab, LBSCRYPT runs as the systemd generator (a link named
#     lbscrypt-generator, as it is installed) on it and must write that tree exactly (the
#     lbscrypttab's own path read as /etc/lbscrypttab) and exit with the status the case's
#     exit-status file gives (0 without one). The other cases' trees come from entries the unit
#     tests build (units_test.cpp), which compare them byte for byte.
#   - `systemd-analyze verify` runs on every unit of every golden tree, with the tree as the unit
#     path, so its drop-ins and .requires/.wants links are read as at boot, and ExecStart= naming
#     LBSCRYPT. Any output is a failure: systemd-analyze exits 0 on some warnings.
# Exit 77 (skipped) where the host has no systemd-analyze.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: verify_units.sh LBSCRYPT DATA" >&2; exit 2; }
tool=$(realpath "$1") data=$(realpath "$2")
command -v systemd-analyze >/dev/null || { echo "no systemd-analyze: skipped"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$tool" "$work/lbscrypt-generator"

failed=0
cases=0
for dir in "$data"/generator*/; do
	case=$(basename "$dir")
	[ -d "$dir/expected" ] || { echo "$case: no expected/ tree" >&2; exit 1; }
	cases=$((cases + 1))
	if [ -f "$dir/lbscrypttab" ]; then
		out=$work/$case-generated
		mkdir -p "$out/normal" "$out/early" "$out/late"
		want=0
		[ ! -f "$dir/exit-status" ] || want=$(<"$dir/exit-status")
		rc=0
		"$work/lbscrypt-generator" --tab "$dir/lbscrypttab" --tool /usr/sbin/lbscrypt "$out/normal" "$out/early" "$out/late" \
			2>"$out/stderr" || rc=$?
		if [ "$rc" != "$want" ]; then
			echo "$case: the generator exited $rc, not $want: $(cat "$out/stderr")" >&2
			failed=1
		fi
		# The units name the file they came from: here the case's lbscrypttab.
		find "$out/normal" -type f -exec sed -i "s|$dir/*lbscrypttab|/etc/lbscrypttab|g" {} +
		if ! diff -r --no-dereference "$dir/expected" "$out/normal" >"$out/diff" 2>&1; then
			echo "$case: the generator's tree differs from the golden one:" >&2
			cat "$out/diff" >&2
			failed=1
		fi
	fi
	# The golden tree as installed units: ExecStart= runs this build's tool.
	tree=$work/$case-verify
	cp -a "$dir/expected" "$tree"
	find "$tree" -type f -name '*.service' -exec sed -i "s|^\(Exec[A-Za-z]*=\)/usr/sbin/lbscrypt |\1$tool |" {} +
	mapfile -t units < <(find "$tree" -maxdepth 1 -type f \( -name '*.service' -o -name '*.slice' \) | sort)
	[ "${#units[@]}" -gt 0 ] || { echo "$case: no unit in the golden tree" >&2; exit 1; }
	if ! report=$(SYSTEMD_UNIT_PATH="$tree:" systemd-analyze verify --man=no "${units[@]}" 2>&1) ||
		[ -n "$report" ]; then
		echo "$case: systemd-analyze verify:" >&2
		echo "$report" >&2
		failed=1
	else
		echo "$case: systemd-analyze verify: ${#units[@]} units clean"
	fi
done
[ "$cases" -gt 0 ] || { echo "no golden case under $data" >&2; exit 1; }
exit "$failed"
