#!/bin/bash
# tools/cmake/tabpage.sh RST VERSION OUT: write to OUT Documentation/lbscrypttab.rst
# as the source of the lbscrypttab(5) manual page for rst2man (the build runs it,
# tools/cmake/Install.cmake): the document as it is, with the man page header
# fields after its title and subtitle.  The date is SOURCE_DATE_EPOCH's
# (dpkg-buildpackage sets it from debian/changelog), else RST's modification
# time.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: tools/cmake/tabpage.sh RST VERSION OUT" >&2; exit 2; }
rst=$1 version=$2 out=$3
epoch=${SOURCE_DATE_EPOCH:-$(date -r "$rst" +%s)}
date=$(date -u -d "@$epoch" +%Y-%m-%d)
trap 'rm -f "$out.tmp"' EXIT

# The subtitle is the second line of dashes (its overline is the first); the
# fields go after it.
awk -v version="$version" -v date="$date" '
	{ print }
	/^-+$/ && ++dashes == 2 {
		print ""
		print ":Manual section: 5"
		print ":Manual group: File Formats"
		print ":Version: lbscrypt " version
		print ":Date: " date
		done = 1
	}
	END { if (!done) { print "tabpage.sh: no subtitle found" > "/dev/stderr"; exit 1 } }
' "$rst" >"$out.tmp"
mv "$out.tmp" "$out"
trap - EXIT
