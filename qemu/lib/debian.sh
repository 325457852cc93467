# shellcheck shell=bash
# Debian packages for the rig, through a private apt configuration under the cache.
# Sourced by common.sh (which sets LBS_CACHE, LBS_TOP, log and fail).
#
# The machine's apt setup is never changed: the private configuration has its own
# source list (made by apt-sources.py from the machine's, either format), package
# lists for both architectures (amd64 for the build machine's kbuild tools, arm64
# for the guests), an empty dpkg status (so nothing installed on the host changes a
# resolution) and deb-src entries (fio's source). Debian unstable and
# experimental are among its sources for the Linux 7.x source packages alone;
# the pin (apt-sources.py --preferences) gives every other package of theirs
# priority -1.

LBS_APT=$LBS_CACHE/apt
LBS_HOST_ARCH=$(dpkg --print-architecture)
# Package lists older than this are refreshed before anything is resolved.
LBS_APT_MAX_AGE=${LBS_APT_MAX_AGE:-86400}

# apt_private COMMAND ARGS...: apt-get or apt-cache with the private configuration.
# Resolution is for LBS_APT_ARCH (default the build machine's) with the build
# machine's packages beside it, or for the architectures LBS_APT_ARCHS lists.
apt_private() {
	local cmd=$1
	shift
	"$cmd" -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$LBS_APT/sources" \
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$LBS_APT/preferences" \
		-o Dir::State="$LBS_APT/state" -o Dir::State::Lists="$LBS_APT/lists" \
		-o Dir::State::status="$LBS_APT/status" -o Dir::Cache="$LBS_APT/cache" \
		-o Dir::Cache::pkgcache=pkgcache.bin -o Dir::Cache::srcpkgcache=srcpkgcache.bin \
		-o APT::Architecture="${LBS_APT_ARCH:-$LBS_HOST_ARCH}" \
		-o APT::Architectures="${LBS_APT_ARCHS:-${LBS_APT_ARCH:-$LBS_HOST_ARCH},$LBS_HOST_ARCH}" \
		-o APT::Sandbox::User=root -o APT::Install-Recommends=false "$@"
}

# apt_refresh [force]: make the private package lists current (at most
# LBS_APT_MAX_AGE seconds old, or now with "force"). Offline with recent-enough
# lists; a failed refresh of existing lists only warns.
apt_refresh() {
	local stamp=$LBS_APT/lists/.updated sources pin age
	mkdir -p "$LBS_APT/sources" "$LBS_APT/preferences" "$LBS_APT/state" "$LBS_APT/lists/partial" \
		"$LBS_APT/cache/archives/partial"
	: >>"$LBS_APT/status"
	sources=$(python3 "$LBS_TOP/qemu/lib/apt-sources.py") || fail "cannot make the rig's apt sources (above)"
	pin=$(python3 "$LBS_TOP/qemu/lib/apt-sources.py" --preferences) || fail "cannot make the rig's apt pin"
	# the pin first: unstable and experimental are never listed without it
	# (unstable.pref: an older rig's pin, for unstable alone)
	rm -f "$LBS_APT/preferences/unstable.pref"
	if [ "$pin" != "$(cat "$LBS_APT/preferences/newer.pref" 2>/dev/null)" ]; then
		printf '%s\n' "$pin" >"$LBS_APT/preferences/newer.pref"
	fi
	if [ "$sources" != "$(cat "$LBS_APT/sources/debian.sources" 2>/dev/null)" ]; then
		printf '%s\n' "$sources" >"$LBS_APT/sources/debian.sources"
		rm -f "$stamp"
	fi
	if [ -f "$stamp" ] && [ "${1:-}" != force ]; then
		age=$(($(date +%s) - $(stat -c %Y "$stamp")))
		[ "$age" -ge "$LBS_APT_MAX_AGE" ] || return 0
	fi
	(
		flock 8
		# another run may have refreshed them while this one waited
		if [ -f "$stamp" ] && [ "${1:-}" != force ] &&
			[ $(($(date +%s) - $(stat -c %Y "$stamp"))) -lt "$LBS_APT_MAX_AGE" ]; then
			exit 0
		fi
		log "updating the rig's package lists (amd64, arm64, sources)"
		if LBS_APT_ARCH=arm64 apt_private apt-get update >"$LBS_APT/update.log" 2>&1; then
			touch "$stamp"
		elif [ -f "$stamp" ]; then
			log "warning: apt-get update failed (see $LBS_APT/update.log); using lists from $(date -r "$stamp")"
		else
			cat "$LBS_APT/update.log" >&2
			fail "apt-get update of the rig's package lists failed (above): is the Debian archive reachable?"
		fi
	) 8>"$LBS_APT/update.lock"
}

# apt_versions ARCH NAME: the versions of NAME for ARCH in the lists, newest first.
apt_versions() {
	apt_newest "$1" "$2" all | cut -d' ' -f1
}

# apt_newest ARCH NAME... [all]: "version name" of the newest version of any NAME
# for ARCH in the lists (binary packages, not sources); with "all", every version,
# newest first. One apt-cache call for all names.
apt_newest() {
	local arch=$1 count=1
	shift
	[ "${*: -1}" != all ] || { count=1000000; set -- "${@:1:$#-1}"; }
	LBS_APT_ARCH=$arch LBS_APT_ARCHS=$arch apt_private apt-cache madison "$@" 2>/dev/null |
		awk -F'|' '{ gsub(/ /, "", $1); gsub(/ /, "", $2) } $3 ~ /Packages/ { print $2, $1 }' |
		sort -u | sort -rV | head -n "$count"
}

# apt_has ARCH NAME VERSION: the lists know NAME at VERSION for ARCH.
apt_has() {
	apt_versions "$1" "$2" | grep -qxF "$3"
}

# deb_cached ARCH SPEC: the cached .deb of SPEC (name[:arch]=version), if there is one.
deb_cached() {
	local name=${2%%=*} version=${2#*=} want=$1 a file
	case $name in *:*) want=${name#*:} name=${name%%:*} ;; esac
	for a in "$want" all; do
		file=$LBS_CACHE/debs/${name}_${version//:/%3a}_$a.deb
		[ -f "$file" ] && { printf '%s\n' "$file"; return 0; }
	done
	return 1
}

# deb_paths ARCH SPEC...: print the cached .deb of each SPEC (name[:arch]=version;
# unqualified names are ARCH's or arch:all; name:amd64 is the build machine's),
# downloading the missing ones in one go.
deb_paths() {
	local arch=$1 spec debs=$LBS_CACHE/debs
	local -a missing=()
	shift
	mkdir -p "$debs"
	for spec in "$@"; do
		deb_cached "$arch" "$spec" >/dev/null || missing+=("$spec")
	done
	if [ "${#missing[@]}" -gt 0 ]; then
		apt_refresh
		log "downloading ${#missing[@]} Debian packages"
		if ! (cd "$debs" && LBS_APT_ARCH=$arch apt_private apt-get download "${missing[@]}" >"$LBS_APT/download.log" 2>&1); then
			# A stale list may name what the archive has dropped since.
			apt_refresh force
			(cd "$debs" && LBS_APT_ARCH=$arch apt_private apt-get download "${missing[@]}" >"$LBS_APT/download.log" 2>&1) || {
				grep -E '^(E|W):' "$LBS_APT/download.log" >&2 || cat "$LBS_APT/download.log" >&2
				fail "apt-get download of ${missing[*]} failed (above)"
			}
		fi
	fi
	for spec in "$@"; do
		deb_cached "$arch" "$spec" || fail "apt-get download of $spec left no .deb in $debs"
	done
}

# cryptroot_specs ARCH: Debian's cryptroot at the build machine's cryptsetup
# version (its libcryptsetup12 for ARCH): cryptsetup-initramfs and the two
# packages its hook copies from, as deb_paths specs. tests/initramfs-check
# unpacks them (never installs them); tests/fetch-check downloads them.
cryptroot_specs() {
	local v
	v=$(dpkg-query -W -f='${Version}' "libcryptsetup12:$1" 2>/dev/null) && [ -n "$v" ] || return 1
	printf '%s\n' "cryptsetup-initramfs=$v" "cryptsetup=$v" "cryptsetup-bin=$v"
}

# fetch_debs ARCH DIR SPEC...: unpack the packages SPEC... of ARCH into DIR.
fetch_debs() {
	local arch=$1 dir=$2 deb
	local -a files
	shift 2
	mkdir -p "$dir"
	mapfile -t files < <(deb_paths "$arch" "$@")
	[ "${#files[@]}" -eq $# ] || fail "could not fetch all of: $*"
	for deb in "${files[@]}"; do
		dpkg-deb -x "$deb" "$dir"
	done
}

# debian_mirrors: "ARCHIVE SECURITY", the machine's Debian mirrors (the first
# entry of a Debian suite, of any release: apt's own reading of its sources in
# either format), else deb.debian.org's; what qemu/lib/buildroot and
# tests/buildroot-check debootstrap from.
debian_mirrors() {
	# shellcheck disable=SC2016 # apt's fields, not the shell's
	apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
		awk '
			function base(s) { sub(/-(updates|backports|proposed-updates|security)$/, "", s); return s }
			base($2) !~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable)$/ { next }
			$2 ~ /-security$/ { if (sec == "") sec = $1; next }
			arc == "" { arc = $1 }
			END {
				if (arc == "") arc = "http://deb.debian.org/debian"
				if (sec == "") sec = "http://deb.debian.org/debian-security"
				sub(/\/$/, "", arc); sub(/\/$/, "", sec)
				print arc, sec
			}'
}
