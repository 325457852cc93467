# lbscrypt: entry points. See README.md and Documentation/testing.rst.
#
#   make deps      install what the build machine lacks (apt-get; once)
#                  (make deps-check: what it lacks, in one list; installs nothing)
#   make matrix    the sector_size acceptance matrix on every rig kernel, with the
#                  bare tool (KERNEL=PATH: on a kernel build tree of yours;
#                  Documentation/qemu-rig.rst); make matrix-check: with the packages, judged
#   make check     everything CI runs, stage by stage with the time of each (below)
#   make kmod      build dm-crypt-lbs.ko for every rig kernel
#   make engine    build the emulated offload engine (tests/engine/, test-only)
#   make bench     the benchmarks (qemu/bench; BENCH_ARGS=--full; not part of check)
#   make harden    the debug kernel: suite, fuzzing, pressure, faults (qemu/harden; not part of check)
#   make cryptsetup-tests  cryptsetup's own tests, stock against ours (qemu/cryptsetup-tests)
#   make stacking  what stacks on a large-sector volume, on arm64-64k-debug (lbscrypt.rst's table)
#   make systemd-check  /etc/lbscrypttab volumes opened at boot by systemd as PID 1, on arm64-64k
#   make deb       the Debian packages (packaging/deb.mk)
#   make tools-test  the host unit tests alone
#   make fetch-check  download every package a fresh machine needs into an empty cache
#
# KERNELS="arm64-64k amd64-4k" narrows the kernels of kmod, matrix and check.

SHELL := /bin/bash
TOP := $(CURDIR)
KERNELS ?= $(shell awk '!/^\#/ && NF { print $$1 }' $(TOP)/qemu/kernels.conf)
BUILD := $(TOP)/build
export LBS_BUILD := $(BUILD)
# Downloads, kernels, rootfs images and the compiler cache live outside the checkout.
export LBSCRYPT_CACHE ?= $(HOME)/.cache/lbscrypt
export CCACHE_DIR ?= $(LBSCRYPT_CACHE)/ccache
# Paths relative to the checkout, so a fresh clone elsewhere hits the same entries
# (debug info would otherwise hash the directory).
export CCACHE_BASEDIR ?= $(TOP)
export CCACHE_NOHASHDIR ?= 1

DEPS_LISTS := qemu/host-packages $(wildcard tools/deps.txt packaging/host-packages)

# Debian 12 builds here (below the else). Any other host builds in the rig's
# Debian 12 build root (qemu/lib/buildroot, which refuses a host that is not
# Debian or Ubuntu on amd64): make deps and make matrix re-run make there, whose
# Debian 12 takes the else; every other goal, make check among them, is refused
# (README.md, "For developers"). LBS_OS_RELEASE: another os-release to read.
HOST_OS_RELEASE := $(file <$(or $(LBS_OS_RELEASE),/etc/os-release))
ifneq ($(sort $(filter ID=debian VERSION_ID="12",$(HOST_OS_RELEASE))),ID=debian VERSION_ID="12")
BUILDROOT_GOALS := deps deps-check matrix
REFUSED_GOALS := $(sort all $(filter-out $(BUILDROOT_GOALS),$(MAKECMDGOALS)))
.PHONY: $(BUILDROOT_GOALS) $(REFUSED_GOALS)
$(REFUSED_GOALS):
	@qemu/lib/buildroot --refuse $@
deps matrix:
	@qemu/lib/buildroot make $@
deps-check:
	@qemu/lib/buildroot --check $(DEPS_LISTS)
else

.PHONY: all deps deps-check kernels kmod engine matrix-tree matrix-tree-check newest-kernel-check bench bench-smoke cryptsetup-tests harden stacking systemd-check handover-check check-full fuzz-check tools-fuzz kmod-lint initramfs-check matrix matrix-check rig-test guest-test check lint-shell clean \
	fetch-check rig-host-test

all: kmod tools

deps:
	@qemu/lib/deps $(DEPS_LISTS)

deps-check:
	@qemu/lib/deps --check $(DEPS_LISTS)

-include tools/tools.mk
-include packaging/deb.mk

kernels: deps
	@for k in $(KERNELS); do qemu/lib/kernel $$k >/dev/null || exit 1; done

kmod: kernels
	@for k in $(KERNELS); do \
		echo "kmod: building for $$k"; \
		qemu/lib/build-kmod $$k >/dev/null || exit 1; \
	done

engine: kernels
	@for k in $(KERNELS); do \
		echo "engine: building for $$k"; \
		qemu/lib/build-engine $$k >/dev/null || exit 1; \
	done

# make bench [KERNELS=...] [BENCH_ARGS="--full | --reps N --runtime S"]: default
# kernels arm64-64k arm64-16k arm64-4k (Documentation/performance.rst).
BENCH_KERNELS := $(if $(filter command line,$(origin KERNELS)),$(KERNELS),arm64-64k arm64-16k arm64-4k)
bench: deps
	@for k in $(BENCH_KERNELS); do \
		qemu/lib/kernel $$k >/dev/null && qemu/lib/build-kmod $$k >/dev/null && \
			qemu/lib/build-engine $$k >/dev/null || exit 1; \
	done
	@qemu/bench $(BENCH_ARGS) $(BENCH_KERNELS)

# make check's one-repetition pass of one size on one kernel (arm64-64k when it
# is among KERNELS): the benchmark scripts run end to end; no timing is judged.
SMOKE_KERNEL := $(if $(filter arm64-64k,$(KERNELS)),arm64-64k,$(firstword $(KERNELS)))
# make cryptsetup-tests: cryptsetup's own tests, stock against ours as crypt, one
# boot each per kernel (qemu/cryptsetup-tests; KERNELS default arm64-4k arm64-64k).
# CSTEST_ARGS="" for every image of tcrypt and bitlk (hours under emulation).
CSTEST_KERNELS := $(if $(filter command line,$(origin KERNELS)),$(KERNELS),arm64-4k arm64-64k)
CSTEST_ARGS ?= --subset
cryptsetup-tests: deps $(GUEST_TOOLS)
	@qemu/cryptsetup-tests $(CSTEST_ARGS) $(CSTEST_KERNELS)

# make stacking: tests/guest/stacking.sh alone on arm64-64k-debug (the 64K
# kernel with btrfs and XFS, which arm64-64k leaves out), the cells of
# lbscrypt.rst's table of what stacks on a large-sector volume (make harden runs
# it too). The guest's log: build/stacking/arm64-64k-debug.log.
stacking: deps $(GUEST_TOOLS)
	@qemu/lib/kernel arm64-64k-debug >/dev/null && qemu/lib/build-kmod arm64-64k-debug >/dev/null
	@mkdir -p $(BUILD)/stacking && set -o pipefail && \
		qemu/run arm64-64k-debug --module lbscrypt --timeout 1800 -- bash /lbs/tests/guest/common/suite.sh stacking \
		| tee $(BUILD)/stacking/arm64-64k-debug.log

bench-smoke: kmod engine
	@qemu/bench --smoke $(SMOKE_KERNEL)

# The guests carry the tool, installed from its Debian package (packaging/deb.mk).
GUEST_TOOLS := $(if $(wildcard packaging/deb.mk),deb,$(if $(wildcard tools/tools.mk),tools tools-arm64,))
# the reencrypt part of the benchmarks boots the tool too (qemu/bench --reencrypt)
bench bench-smoke: $(GUEST_TOOLS)

# make matrix KERNEL=PATH: the matrix on a kernel build tree someone built (arm64
# or amd64): its .config is read, and refused when it lacks what the rig needs,
# before anything is built; ours is built against it by qemu/matrix.
# The matrix's guests run `lbscrypt matrix` and nothing else of the packages, so
# make matrix builds the bare tool (MATRIX_TOOLS) for the architectures of the
# kernels asked for (a tree's from its .config), and the guests get it even
# where an earlier make deb left a package (LBS_GUEST_TOOL=binary, qemu/run).
# make matrix-check (a stage of make check) boots the packages, as make check's
# other guest stages do, and judges the results.
MATRIX_ARCHS := $(if $(KERNEL),$(if $(shell grep -sx 'CONFIG_ARM64=y' $(KERNEL)/.config),arm64) \
		$(if $(shell grep -sx 'CONFIG_X86_64=y' $(KERNEL)/.config),amd64), \
	$(sort $(shell awk -v ks=' $(KERNELS) ' '!/^\#/ && NF && index(ks, " " $$1 " ") { print $$2 }' \
		qemu/kernels.conf qemu/kernels-extra.conf qemu/kernels-debug.conf \
		$(wildcard $(LBSCRYPT_CACHE)/kernels/trees.conf))))
MATRIX_TOOLS := $(if $(filter amd64,$(MATRIX_ARCHS)),tools-bin) $(if $(filter arm64,$(MATRIX_ARCHS)),tools-arm64)
MATRIX_DEPS := $(if $(KERNEL),matrix-tree deps,kmod)
matrix: $(MATRIX_DEPS) $(MATRIX_TOOLS)
	@LBS_GUEST_TOOL=binary qemu/matrix $(or $(KERNEL),$(KERNELS))

matrix-tree:
	@qemu/lib/kernel-tree $(KERNEL) >/dev/null

matrix-check: $(MATRIX_DEPS) $(GUEST_TOOLS)
	@qemu/matrix $(or $(KERNEL),$(KERNELS))
	@python3 tests/expected/matrix_judge.py $(BUILD)/matrix/results.json

rig-test: kernels
	@tests/qemu-run-test

guest-test: kmod engine $(GUEST_TOOLS)
	@tests/run-guest-tests $(KERNELS)

kmod-lint: kernels
	@tests/kmod-lint

# The initramfs-tools hook and boot script (tools/initramfs/), from the tool's
# package, run by Debian's mkinitramfs for a Debian kernel, the refusal without the module, and a boot
# whose root is on an lbscrypt volume opened by the image, a volume mid-way through
# lbscrypt reencrypt refused there (tests/initramfs-check).
initramfs-check: kernels deb
	@tests/initramfs-check

# Volumes of /etc/lbscrypttab opened at boot by Debian's systemd as PID 1 on
# arm64-64k (tests/systemd-check): a key file at sector size 65536, a passphrase
# answered by a password agent, a wrong key with check= and nofail, a volume mid-way
# through lbscrypt reencrypt refused by its unit; the disks read
# back on the host after the shutdown. Logs in build/systemd-check/.
systemd-check: deps deb
	@tests/systemd-check

# The hand-over to a kernel whose own dm_crypt is 1.30.0 (tests/handover-check):
# volumes written by dm-crypt-lbs on arm64-64k, then, our package removed and
# the v2 reference (1.30.0) in the stock module's place, opened at boot by the
# lbscrypttab units under systemd, mounted and read back. Logs in build/handover-check/.
handover-check: deps deb
	@tests/handover-check

# make harden: the whole guest suite, the table fuzzer, memory pressure, crypto
# faults and lifecycle tests on the debug kernel (qemu/harden; LBS_HARDEN_TABLES
# for a longer run). Writes build/harden/summary.json. Not part of check.
harden: deps $(GUEST_TOOLS) tools-asan
	@qemu/harden

# make check's bounded fuzzing: the own tests of the judge, of make harden's summary
# and of the argument fuzzer's judge (planted bad results must fail them), then 300
# tables and 30 messages on one rig kernel, stock beside ours.
fuzz-check: kmod
	@python3 tests/harden/judge_test.py
	@python3 tests/harden/summary_test.py
	@python3 tests/harden/argfuzz_test.py
	@LBS_FUZZ_OUT=$(BUILD)/fuzz-check qemu/lib/fuzz-run $(SMOKE_KERNEL) 300 1

# Argument fuzzing of lbscrypt under ASan/UBSan (tests/harden/argfuzz.py; runs as
# nobody when root, so no device is touched): ARGFUZZ_COUNT command lines,
# 300 in make check-full, 3000 under make harden.
ARGFUZZ_COUNT ?= 300
tools-fuzz: tools-asan-build
	@python3 tests/harden/argfuzz.py $(TOOLS_BUILD_DIR)/asan/lbscrypt --count $(ARGFUZZ_COUNT) \
		--json $(BUILD)/argfuzz.json

SHELL_SCRIPTS := qemu/run qemu/matrix qemu/bench qemu/harden qemu/cryptsetup-tests $(filter-out %.py %__pycache__,$(wildcard qemu/lib/*)) qemu/rootfs/init qemu/rootfs/systemd/lbs-command \
	$(wildcard tests/guest/*.sh tests/guest/common/*.sh tests/guest/halves/*.sh bench/guest/*.sh tests/run-guest-tests tests/kmod-lint tests/qemu-run-test tests/fetch-check \
		tests/rig-helpers-test tests/matrix-tree-check tests/newest-kernel-check tests/zoned-nvme-check tests/relabel-check tests/dkms-check tests/deb-check tests/man-check tests/initramfs-check tests/systemd-check tests/handover-check tests/buildroot-check packaging/build-deb \
		tools/cmake/manpage.sh tools/initramfs/hook tools/initramfs/local-top tools/initramfs/local-block kmod/dkms-kernel-hook) .ci/run

lint-shell:
	@shellcheck -x $(SHELL_SCRIPTS)
	@echo "shellcheck: clean ($(words $(SHELL_SCRIPTS)) scripts)"
	@python3 tests/lint_docs_test.py
	@tests/lint-docs

# Every package a fresh machine downloads, into an empty cache: no warm cache hides
# a download that fails (the archive drops pinned builds; apt setups differ).
fetch-check: deps
	@tests/fetch-check $(KERNELS)

# The rig's host-side logic without a guest: apt sources in both formats, the
# fallback from a pinned kernel that left the archive; the torn-sector
# table's generator and check on made-up tears (tests/torn/torn_table_test.py);
# the mainline reference's anchored edits and judge (tests/reference/mainline_test.py).
rig-host-test: deps
	@tests/rig-helpers-test
	@python3 tests/torn/torn_table_test.py
	@python3 tests/reference/mainline_test.py

# Cheap and host-only first, then the module builds, then the guests. The stages
# run in this order, each timed (qemu/lib/stages); make check stops at the first
# that fails. The tool's unit tests run under ASan/UBSan (tools-asan), less the
# cases tagged [slow] (TOOLS_ASAN_SLOW=no: minutes each under ASan; check-full and
# harden run them under ASan, make tools-test and make deb without); the amd64
# package is built without them (DEB_BUILD_OPTIONS=nocheck: `make deb` alone runs
# them in the package build, valgrind included). A word A+B+C runs B, then C,
# beside A: fetch-check (downloads into a cache of its own) and the packages'
# build (deb) beside kmod-lint (the kernel builds on a cold machine, whose
# unpacking and linking leave a core idle); beside the guest tests, which keep
# about 1.4 of the two cores busy, the tool's ASan build first (tools-asan),
# then the checks that build or boot one thing at a time (matrix-check,
# dkms-check, initramfs-check, fuzz-check, bench-smoke, rig-test), which fill the
# cores the two lanes leave idle once the compile is done (module builds take a
# lock per kernel: qemu/lib/build-module). clang-format runs (tools-format);
# clang-tidy (tools-lint: about 20 core-minutes of a cold machine, more than the
# budget leaves) and the tool's argument fuzzing (tools-fuzz) are in
# check-full, and `make tools-lint` before a commit.
CHECK_STAGES := deps lint-shell tools-format rig-host-test kmod-lint+fetch-check+deb kmod deb-lint \
	guest-test+tools-asan+matrix-check+dkms-check+initramfs-check+fuzz-check+bench-smoke+rig-test
check:
	@qemu/lib/stages DEB_BUILD_OPTIONS=nocheck TOOLS_ASAN_SLOW=no \
		$(if $(filter command line,$(origin KERNELS)),KERNELS="$(KERNELS)") $(CHECK_STAGES)

# make check-full: what make check leaves out for its budget (Documentation/testing.rst):
# the kernels of qemu/kernels-extra.conf beside make check's, each with the matrix and
# dkms-check, every guest test on every kernel (LBS_GUEST_ALL=1), the matrix on a
# build tree with dm-crypt built in (matrix-tree-check), the tool's unit tests
# under ASan with the [slow] cases (tools-asan), the tool's argument
# fuzzing (tools-fuzz, 300 lines), clang-tidy over the tool and its tests
# (tools-lint), the module against the newest kernel source of any suite
# (newest-kernel-check), and the boot checks systemd-check, handover-check and
# zoned-nvme-check (ours over a zoned NVMe namespace with metadata) on
# arm64-64k and on arm64-64k-7.3 (there the 1.30.0 stand-in is 7.3's own
# dm-crypt.c with the v2 edits), the matrix on a 7.3 tree relabelled 7.4.0
# (relabel-check), and the README's make deps and make matrix
# KERNELS="arm64-64k" on a fresh Debian 13 chroot, through the Debian 12 build
# root (buildroot-check; as root). Hours, not minutes.
FULL_KERNELS := $(KERNELS) $(shell awk '!/^\#/ && NF { print $$1 }' $(TOP)/qemu/kernels-extra.conf)
check-full: deps
	@$(MAKE) --no-print-directory matrix-check dkms-check guest-test KERNELS="$(FULL_KERNELS)" LBS_GUEST_ALL=1
	@$(MAKE) --no-print-directory matrix-tree-check tools-asan tools-fuzz tools-lint newest-kernel-check \
		systemd-check handover-check
	@tests/systemd-check arm64-64k-7.3
	@tests/handover-check arm64-64k-7.3
	@tests/zoned-nvme-check arm64-64k
	@tests/zoned-nvme-check arm64-64k-7.3
	@tests/relabel-check
	@tests/buildroot-check

# The module compile-tested against the newest Linux source of any Debian suite
# the rig reads (tests/newest-kernel-check; a kernel Debian carries before
# kernels.conf pins it). Part of check-full.
newest-kernel-check: deps
	@tests/newest-kernel-check

# make matrix KERNEL=PATH on a build tree with dm-crypt built in (tests/matrix-tree-check;
# its first run builds that tree into the cache). Part of check-full.
matrix-tree-check: deps $(GUEST_TOOLS)
	@tests/matrix-tree-check

clean:
	rm -rf $(BUILD)

endif # Debian 12
