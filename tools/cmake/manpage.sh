#!/bin/bash
# tools/cmake/manpage.sh RST VERSION OUT: write to OUT Documentation/lbscrypt.rst
# rearranged as the source of the lbscrypt(8) manual page for rst2man (the build
# runs it, tools/cmake/Install.cmake): man page header fields, SYNOPSIS first,
# the introduction as DESCRIPTION, the other sections in their order except the
# one on installing the Debian package, SEE ALSO.  The date is
# SOURCE_DATE_EPOCH's (dpkg-buildpackage sets it from debian/changelog), else
# RST's modification time.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: tools/cmake/manpage.sh RST VERSION OUT" >&2; exit 2; }
rst=$1 version=$2 out=$3
epoch=${SOURCE_DATE_EPOCH:-$(date -r "$rst" +%s)}
date=$(date -u -d "@$epoch" +%Y-%m-%d)
exec >"$out.tmp"
trap 'rm -f "$out.tmp"' EXIT

cat <<HEADER
========
lbscrypt
========

-------------------------------------------------------------------
dm-crypt plain mappings with encryption sectors up to the page size
-------------------------------------------------------------------

:Manual section: 8
:Manual group: System Administration
:Version: lbscrypt $version
:Date: $date

HEADER

# A section title is a line underlined by '=' of its own length; the document
# title is the one with an overline as well.
awk -v skip='Installing the Debian package' '
	{ line[NR] = $0 }
	END {
		n = 0
		for (i = 1; i < NR; i++) {
			if (line[i + 1] ~ /^=+$/ && line[i] !~ /^=+$/ && line[i] != "" &&
			    length(line[i]) == length(line[i + 1]) &&
			    (i == 1 || line[i - 1] !~ /^=+$/))
				start[++n] = i
		}
		if (n == 0) { print "manpage.sh: no sections found" > "/dev/stderr"; exit 1 }
		start[n + 1] = NR + 1
		# the introduction: after the title, without the contents directive
		for (i = 1; i < start[1]; i++)
			if (line[i] ~ /^=+$/ && line[i + 2] ~ /^=+$/) { intro = i + 3; break }
		if (!intro) { print "manpage.sh: no document title found" > "/dev/stderr"; exit 1 }
		for (s = 1; s <= n; s++)
			if (line[start[s]] == "Synopsis") emit(s)
		if (!synopsis) { print "manpage.sh: no Synopsis section" > "/dev/stderr"; exit 1 }
		print "Description"
		print "==========="
		for (i = intro; i < start[1]; i++) {
			if (line[i] ~ /^\.\. contents::/) { while (line[i + 1] ~ /^   /) i++; continue }
			print line[i]
		}
		for (s = 1; s <= n; s++)
			if (line[start[s]] != "Synopsis" && line[start[s]] !~ "^(" skip ")$") emit(s)
	}
	function emit(s,   i) {
		if (line[start[s]] == "Synopsis") synopsis = 1
		for (i = start[s]; i < start[s + 1]; i++) print line[i]
	}
' "$rst"

cat <<'FOOTER'

See also
========

**cryptsetup**\ (8), **dmsetup**\ (8), **dkms**\ (8), **crypttab**\ (5),
**systemd-ask-password**\ (1), **systemd.generator**\ (7);
/usr/share/doc/dm-crypt-lbs-dkms/README.Debian when the module package is installed.
FOOTER
mv "$out.tmp" "$out"
trap - EXIT
