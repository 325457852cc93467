#!/bin/bash
# tools/cmake/manpage.sh SECTION RST VERSION OUT: write to OUT the source of a
# manual page for rst2man (the build runs it for every page,
# tools/cmake/Install.cmake).  RST is a document of Documentation/ whose title
# and subtitle are the page's NAME line ("lbscrypt-open" and "open a plain
# mapping").  OUT is RST with:
# - the man page header fields (SECTION, its group, lbscrypt VERSION, the
#   date) after the subtitle;
# - each line ".. include:: FILE" (FILE beside RST) replaced by FILE, so the
#   options several commands share have one source;
# - no ".. contents::" directive (a man page has no links to jump to);
# - no section that the comment ".. not in the manual page" comes before (up
#   to the next section title underlined with '='): what concerns the source
#   tree, not the installed program.
# The date is SOURCE_DATE_EPOCH's (dpkg-buildpackage sets it from
# debian/changelog), else RST's modification time.
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: tools/cmake/manpage.sh SECTION RST VERSION OUT" >&2; exit 2; }
section=$1 rst=$2 version=$3 out=$4
case $section in
4) group='Devices and Kernel Interfaces' ;;
5) group='File Formats' ;;
8) group='System Administration' ;;
*) echo "manpage.sh: section $section: give 4, 5 or 8" >&2; exit 2 ;;
esac
epoch=${SOURCE_DATE_EPOCH:-$(date -r "$rst" +%s)}
date=$(date -u -d "@$epoch" +%Y-%m-%d)
trap 'rm -f "$out.tmp"' EXIT

awk -v dir="$(dirname "$rst")" -v section="$section" -v group="$group" \
	-v version="$version" -v date="$date" '
	# the document with its includes in place
	function add(line) { text[++n] = line }
	{
		if ($0 ~ /^\.\. include:: [^ ]+$/) {
			file = dir "/" $3
			got = 0
			while ((getline line < file) > 0) { add(line); got = 1 }
			close(file)
			if (!got) { print "manpage.sh: cannot read " file > "/dev/stderr"; bad = 1; exit 1 }
		} else
			add($0)
	}
	function title(i) {
		return text[i + 1] ~ /^=+$/ && text[i] != "" && text[i] !~ /^=+$/ &&
		       length(text[i]) == length(text[i + 1])
	}
	END {
		if (bad) exit 1
		dashes = 0
		for (i = 1; i <= n; i++) {
			if (text[i] ~ /^\.\. contents::/) {
				while (i < n && text[i + 1] ~ /^   /) i++
				continue
			}
			if (text[i] == ".. not in the manual page") {
				i++
				while (i <= n && text[i] == "") i++
				if (!title(i)) {
					print "manpage.sh: \".. not in the manual page\" before no section title (line " i ")" > "/dev/stderr"
					exit 1
				}
				for (i += 2; i <= n && !title(i); i++) ;
				i--
				continue
			}
			print text[i]
			if (!done && text[i] ~ /^-+$/ && ++dashes == 2) {
				print ""
				print ":Manual section: " section
				print ":Manual group: " group
				print ":Version: lbscrypt " version
				print ":Date: " date
				done = 1
			}
		}
		if (!done) { print "manpage.sh: no subtitle (the NAME line) found" > "/dev/stderr"; exit 1 }
	}
' "$rst" >"$out.tmp"
mv "$out.tmp" "$out"
trap - EXIT
