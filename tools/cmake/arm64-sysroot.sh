#!/bin/bash
# Builds (once) the arm64 sysroot for cross-building lbscrypt from the Debian packages named
# in tools/arm64-sysroot.txt, and prints its path. The directory is keyed by a hash of the
# package list and the candidate versions, so a changed list makes a new sysroot.
set -euo pipefail

list=${1:?usage: arm64-sysroot.sh PACKAGE-LIST}
cache=${LBSCRYPT_CACHE:-$HOME/.cache/lbscrypt}

fail() {
	echo "arm64-sysroot: $*" >&2
	exit 1
}

mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list" | awk '{ print $1 }')
[ "${#packages[@]}" -gt 0 ] || fail "no packages in $list"

versions=$(apt-cache policy "${packages[@]}" 2>/dev/null | awk '/^[^ ]/ { p = $1 } /Candidate:/ { print p, $2 }')
key=$(printf '%s\n' "$versions" | sha256sum | cut -c1-16)
sysroot=$cache/sysroot-arm64-$key

if [ -f "$sysroot/.complete" ]; then
	echo "$sysroot"
	exit 0
fi

grep -q ' (none)$' <<<"$versions" &&
	fail "no candidate for: $(grep ' (none)$' <<<"$versions" | tr '\n' ' ') (run: dpkg --add-architecture arm64; apt-get update)"

mkdir -p "$cache"
work=$(mktemp -d "$cache/sysroot-arm64-tmp.XXXXXX")
chmod 755 "$work" # apt downloads as _apt
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

(cd "$work" && apt-get download "${packages[@]}" >/dev/null 2> >(grep -v "unsandboxed" >&2)) ||
	fail "apt-get download failed"
mkdir -p "$work/root"
for deb in "$work"/*.deb; do
	dpkg-deb -x "$deb" "$work/root"
done

# Absolute symlinks (lib.so -> /lib/...) must point inside the sysroot.
while IFS= read -r -d '' link; do
	target=$(readlink "$link")
	case $target in
	/*) ln -sfn "$work/root$target" "$link.tmp" && mv -T "$link.tmp" "$link" ;;
	esac
done < <(find "$work/root" -type l -print0)

rm -rf "$sysroot"
mv "$work/root" "$sysroot"
# Re-point the links at the final location.
while IFS= read -r -d '' link; do
	target=$(readlink "$link")
	case $target in
	"$work/root"/*) ln -sfn "$sysroot${target#"$work/root"}" "$link" ;;
	esac
done < <(find "$sysroot" -type l -print0)
touch "$sysroot/.complete"
echo "$sysroot"
