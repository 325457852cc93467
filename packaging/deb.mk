# packaging/deb.mk: the Debian packages. Included by the top-level Makefile; on its
# own: `make -f packaging/deb.mk TARGET` from the repository root.
#
#   deb         build/dm-crypt-lbs-dkms_<version>_all.deb (kmod/ for DKMS),
#               build/lbscrypt_<version>_amd64.deb and _arm64.deb (the tool from
#               make tools / make tools-arm64); debhelper, in copies under build/deb/
#   deb-lint    lintian over the three (any error or warning fails) and
#               tests/deb-check (contents, Depends, man page, bash completion)
#   dkms-check  dkms build of the dkms package against the rig kernels' kbuild
#               trees (KERNELS, default all), never the host's /lib/modules
#
# Packages they need: packaging/host-packages (for `make deps`).

DEB_TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
DEB_VERSION := $(strip $(file <$(DEB_TOP)/VERSION))
DEB_BUILD := $(or $(LBS_BUILD),$(abspath $(DEB_TOP)/build))
DEB_HOST_ARCH := $(shell dpkg --print-architecture)
DEB_FILES := $(DEB_BUILD)/dm-crypt-lbs-dkms_$(DEB_VERSION)_all.deb \
	$(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_$(DEB_HOST_ARCH).deb \
	$(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_arm64.deb

# The tool targets: the top-level Makefile includes tools/tools.mk before this
# file; on its own, this file includes it.
ifndef TOOLS_BUILD_DIR
include $(DEB_TOP)/tools/tools.mk
endif

.PHONY: deb deb-dkms deb-tools deb-lint dkms-check

deb: deb-dkms deb-tools

deb-dkms:
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/packaging/build-deb dkms

deb-tools: tools tools-arm64
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/packaging/build-deb lbscrypt $(DEB_HOST_ARCH) $(TOOLS_BUILD_DIR)/host/lbscrypt
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/packaging/build-deb lbscrypt arm64 $(TOOLS_BUILD_DIR)/arm64/lbscrypt

# lintian's own exit status decides: --fail-on error,warning. Overrides sit in
# packaging/*/debian/*.lintian-overrides, each with its reason.
deb-lint: deb
	@lintian --fail-on error,warning --display-info --pedantic $(DEB_FILES)
	@echo "lintian: no errors or warnings in $(notdir $(DEB_FILES))"
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/tests/deb-check

dkms-check: deb-dkms
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/tests/dkms-check $(KERNELS)
