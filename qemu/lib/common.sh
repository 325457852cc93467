# shellcheck shell=bash
# Shared helpers of the rig's host-side scripts. Source it; it sets nothing else.

LBS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LBS_CACHE=${LBSCRYPT_CACHE:-$HOME/.cache/lbscrypt}
LBS_BUILD=${LBS_BUILD:-$LBS_TOP/build}
LBS_KERNELS_CONF=${LBS_KERNELS_CONF:-$LBS_TOP/qemu/kernels.conf}
# Kernels that only some runs boot (make harden's debug kernel, make check-full's
# extra kernels): files separated by spaces, known to kernel_row, never in the
# default list of kernel_ids.
LBS_KERNELS_EXTRA=${LBS_KERNELS_EXTRA:-$LBS_TOP/qemu/kernels-debug.conf $LBS_TOP/qemu/kernels-extra.conf}
# Kernel build trees of anyone's (qemu/lib/kernel-tree PATH registers one): rows
# of kind "tree" whose last column is the tree's path, known to kernel_row too.
LBS_TREES_CONF=$LBS_CACHE/kernels/trees.conf

fail() {
	printf '%s: error: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

log() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
}

# All kernel ids, in the order of kernels.conf.
kernel_ids() {
	awk '!/^#/ && NF { print $1 }' "$LBS_KERNELS_CONF"
}

# kernel_row ID: sets K_ID K_ARCH K_PAGE K_KIND K_RELEASE K_VERSION.
kernel_row() {
	local line
	local -a extra
	read -r -a extra <<<"$LBS_KERNELS_EXTRA"
	# (no trees.conf until a tree is registered)
	[ ! -f "$LBS_TREES_CONF" ] || extra+=("$LBS_TREES_CONF")
	line=$(cat "$LBS_KERNELS_CONF" "${extra[@]}" 2>/dev/null | awk -v id="$1" '!/^#/ && $1 == id')
	[ -n "$line" ] || fail "unknown kernel '$1' (known: $(kernel_ids | tr '\n' ' '))"
	# shellcheck disable=SC2034 # read by the callers
	read -r K_ID K_ARCH K_PAGE K_KIND K_RELEASE K_VERSION <<<"$line"
}

# kernel_id KERNEL: the id of KERNEL, a rig kernel's id or, when it holds a '/',
# the path of a kernel build tree (registered by qemu/lib/kernel-tree, which
# refuses a tree the rig cannot boot).
kernel_id() {
	case $1 in
	*/*) "$LBS_TOP/qemu/lib/kernel-tree" "$1" || exit 1 ;;
	*) printf '%s\n' "$1" ;;
	esac
}

# Short content hash of files and strings, for cache keys.
cache_key() {
	local item
	for item in "$@"; do
		if [ -f "$item" ]; then
			sha256sum <"$item"
		else
			printf '%s\n' "$item"
		fi
	done | sha256sum | cut -c1-12
}

# cache_lock PATH: hold an exclusive lock on PATH.lock until the script exits, so
# that two runs (make check and a developer's qemu/run) never build one cache
# entry at the same time. Callers check for the finished entry again after it.
cache_lock() {
	mkdir -p "$(dirname "$1")"
	exec 9>"$1.lock"
	if ! flock -n 9; then
		log "waiting for another run preparing ${1##*/}"
		flock 9
	fi
}

# no_mounts_under DIR: refuse to delete DIR while anything is mounted below it
# (a chroot set up by hand, say): rm -rf would go into the host's /dev and /sys
# (qemu/lib/buildroot, tests/buildroot-check).
no_mounts_under() {
	local m
	m=$(findmnt -rn -o TARGET | awk -v d="$1/" 'index($0 "/", d) == 1' | head -n1)
	[ -z "$m" ] || fail "$m is mounted under $1, which is to be removed: unmount it first (umount -R $m)"
}

# The qemu binary and the console of an architecture.
qemu_system() {
	case $1 in
	arm64) echo qemu-system-aarch64 ;;
	amd64) echo qemu-system-x86_64 ;;
	*) fail "no qemu for architecture $1" ;;
	esac
}

# guest_cc ARCH: the C compiler for programs that run in ARCH's guests (the
# host's gcc, or the cross compiler qemu/host-packages installs).
guest_cc() {
	if [ "$1" = "$(dpkg --print-architecture)" ]; then
		echo gcc
		return 0
	fi
	case $1 in
	arm64) echo aarch64-linux-gnu-gcc ;;
	amd64) echo x86_64-linux-gnu-gcc ;;
	*) fail "no compiler for architecture $1" ;;
	esac
}

# kbuild_vars: the make variables that build an out-of-tree module for the
# kernel kernel_row last read, one per line (mapfile -t vars < <(kbuild_vars)):
# kbuild's ARCH, CROSS_COMPILE (the guest compiler's prefix, empty for the host's
# architecture) and, when the machine has ccache, its hook: Debian's kbuild trees
# take DEBIAN_KERNEL_USE_CCACHE, a kernel the rig builds takes CC.
kbuild_vars() {
	local cc prefix
	cc=$(guest_cc "$K_ARCH")
	prefix=${cc%gcc}
	case $K_ARCH in
	amd64) echo ARCH=x86 ;;
	*) echo "ARCH=$K_ARCH" ;;
	esac
	echo "CROSS_COMPILE=$prefix"
	command -v ccache >/dev/null || return 0
	if [ "$K_KIND" = build ] || [ "$K_KIND" = tree ]; then
		echo "CC=ccache ${prefix}gcc"
	else
		echo DEBIAN_KERNEL_USE_CCACHE=1
	fi
}

# config_files ID: the config fragments of built kernel ID, base first:
# qemu/configs/ID.config, after the one its first line names with
# "#include NAME.config" (recursively).
config_files() {
	local f=$LBS_TOP/qemu/configs/$1.config base
	[ -f "$f" ] || fail "no config fragment $f"
	base=$(sed -n '1s/^#include \([^ ]*\)\.config$/\1/p' "$f")
	[ -z "$base" ] || config_files "$base"
	printf '%s\n' "$f"
}

# config_fragment ID: the fragments of config_files merged, on stdout; where two
# set one symbol, the later wins.
config_fragment() {
	local -a files
	mapfile -t files < <(config_files "$1")
	awk '
		/^CONFIG_[A-Za-z0-9_]+=/ { sym = $0; sub(/=.*/, "", sym) }
		/^# CONFIG_[A-Za-z0-9_]+ is not set/ { sym = $2 }
		sym == "" { next }
		!(sym in val) { order[n++] = sym }
		{ val[sym] = $0; sym = "" }
		END { for (i = 0; i < n; i++) print val[order[i]] }' "${files[@]}"
}

# tree_image ARCH: where a kernel build tree of ARCH keeps the image qemu boots.
tree_image() {
	case $1 in
	arm64) echo arch/arm64/boot/Image ;;
	amd64) echo arch/x86/boot/bzImage ;;
	*) fail "no kernel image for architecture $1" ;;
	esac
}

# kernel_dir ID [RELEASE VERSION]: the directory kernel ID is prepared in (see
# qemu/lib/kernel); by default for the pinned release and version of kernels.conf.
# A build tree's (kind tree, VERSION its path) is keyed by its path, release,
# .config, Module.symvers and the size and time of its image: a rebuilt tree gets
# a directory of its own. A built kernel (kind build) is keyed by its version and
# the options its fragments set (config_fragment).
kernel_dir() {
	kernel_row "$1"
	[ $# -lt 3 ] || { K_RELEASE=$2 K_VERSION=$3; }
	local key
	if [ "$K_KIND" = tree ]; then
		key=$(cache_key "$K_VERSION" "$K_RELEASE" "$K_VERSION/.config" "$K_VERSION/Module.symvers" \
			"$(stat -c '%s %Y' "$K_VERSION/$(tree_image "$K_ARCH")" 2>/dev/null || true)")
	elif [ "$K_KIND" = build ]; then
		# the options the fragments set, not their text: a comment changes no kernel
		key=$(cache_key "$K_VERSION" "$(config_fragment "$K_ID")")
	else
		key=$(cache_key "$K_RELEASE" "$K_VERSION")
	fi
	printf '%s\n' "$LBS_CACHE/kernels/$K_ID-$key"
}

# shellcheck source=qemu/lib/debian.sh
. "$LBS_TOP/qemu/lib/debian.sh"
