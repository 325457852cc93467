#!/bin/bash
# tools/cmake/tidy.sh BUILD_DIR FILE...: clang-tidy with tools/.clang-tidy over FILE...,
# two at a time, each file against its command in BUILD_DIR/compile_commands.json.
# A file found clean is remembered under $LBSCRYPT_CACHE/tidy, keyed by what decides
# the result: its preprocessed text (the file and every header it includes), its
# compile flags, the configuration and clang-tidy's version. An unchanged file is not
# tidied again (about 30 s each); any change to it or to what it includes is.
set -euo pipefail

build=${1:?usage: tidy.sh BUILD_DIR FILE...}
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${LBSCRYPT_CACHE:-$HOME/.cache/lbscrypt}/tidy
config=$top/tools/.clang-tidy
mkdir -p "$cache"

# tidy_one FILE: tidy FILE unless its key is known clean.
tidy_one() {
	local file command key
	file=$(realpath "$1")
	# the compile command with -E -P in place of -o OUT -c: the preprocessed text
	command=$(python3 -c '
import json, shlex, sys
for entry in json.load(open(sys.argv[1])):
    if entry["file"] == sys.argv[2]:
        argv = shlex.split(entry["command"])
        out = []
        skip = False
        for arg in argv:
            if skip:
                skip = False
            elif arg == "-o":
                skip = True
            elif arg != "-c":
                out.append(arg)
        print(shlex.join(out + ["-E", "-P"]))
        break' "$build/compile_commands.json" "$file")
	if [ -z "$command" ]; then
		echo "tidy: $file is not in $build/compile_commands.json; configure the build first" >&2
		return 1
	fi
	key=$({
		clang-tidy --version
		cat "$config"
		printf '%s\n' "${command//$top/TOP}"
		(cd "$build" && eval "$command" 2>&1 || echo "preprocessing failed") | sed "s|$top|TOP|g"
	} | sha256sum | cut -c1-32)
	[ ! -f "$cache/$key" ] || return 0
	clang-tidy --config-file="$config" -p "$build" --quiet "$file" || return 1
	printf '%s\n' "${file#"$top"/}" >"$cache/$key"
}
export -f tidy_one
export build top cache config
# shellcheck disable=SC2016 # $1 is the inner shell's
printf '%s\n' "$@" | xargs -P 2 -I{} bash -c 'tidy_one "$1"' _ {}
