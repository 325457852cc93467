# lbscrypt: entry points. See README.md and Documentation/testing.rst.
#
#   make deps      install what the build machine lacks (apt-get; once)
#   make matrix    the sector_size acceptance matrix on every rig kernel
#   make check     everything CI runs: host tests, module builds, matrix, guest tests
#   make kmod      build dm-crypt-lbs.ko for every rig kernel
#   make tools-test  the host unit tests alone
#
# KERNELS="arm64-64k amd64-4k" narrows the kernels of kmod, matrix and check.

SHELL := /bin/bash
TOP := $(CURDIR)
KERNELS ?= $(shell awk '!/^\#/ && NF { print $$1 }' $(TOP)/qemu/kernels.conf)
BUILD := $(TOP)/build
export LBS_BUILD := $(BUILD)

.PHONY: all deps kernels kmod kmod-lint matrix matrix-check rig-test guest-test check lint-shell clean

all: kmod tools

DEPS_LISTS := qemu/host-packages $(wildcard tools/deps.txt)

deps:
	@qemu/lib/deps $(DEPS_LISTS)

-include tools/tools.mk

kernels: deps
	@for k in $(KERNELS); do qemu/lib/kernel $$k >/dev/null || exit 1; done

kmod: kernels
	@for k in $(KERNELS); do \
		echo "kmod: building for $$k"; \
		qemu/lib/build-kmod $$k >/dev/null || exit 1; \
	done

# The guests carry the tool (tools/tools.mk builds it for the host and arm64).
GUEST_TOOLS := $(if $(wildcard tools/tools.mk),tools tools-arm64,)

matrix: kmod
	@qemu/matrix $(KERNELS)

matrix-check: matrix
	@python3 qemu/lib/matrix.py check $(BUILD)/matrix/results.json tests/expected/matrix.tsv

rig-test: kernels
	@tests/rig-test

guest-test: kmod $(GUEST_TOOLS)
	@tests/run-guest-tests $(KERNELS)

kmod-lint: kernels
	@tests/kmod-lint

SHELL_SCRIPTS := qemu/run qemu/matrix $(filter-out %.py,$(wildcard qemu/lib/*)) qemu/rootfs/init \
	$(wildcard tests/guest/*.sh tests/run-guest-tests tests/kmod-lint tests/rig-test) .ci/run

lint-shell:
	@shellcheck -x $(SHELL_SCRIPTS)
	@echo "shellcheck: clean ($(words $(SHELL_SCRIPTS)) scripts)"

# Cheap and host-only first, then the module builds, then the guests.
check: TOOLS_TIDY_DIRS := tools/src
check: deps lint-shell tools-test tools-asan tools-lint kmod-lint kmod rig-test matrix-check guest-test

clean:
	rm -rf $(BUILD)
