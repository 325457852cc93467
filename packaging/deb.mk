# packaging/deb.mk: the Debian packages. Included by the top-level Makefile; on its
# own: `make -f packaging/deb.mk TARGET` from the repository root.
#
#   deb         from source with dpkg-buildpackage (packaging/build-deb), under
#               build/deb/ and copied to build/: the source packages
#               dm-crypt-lbs_<version>.dsc and lbscrypt_<version>.dsc, and from
#               them dm-crypt-lbs-dkms_<version>_all.deb (kmod/ for DKMS) and
#               lbscrypt_<version>_amd64.deb (unit tests run) and _arm64.deb
#               (cross-built, -Pcross,nocheck)
#   deb-lint    lintian over the three and the two .dsc (any error or warning
#               fails) and tests/deb-check (contents, Depends, man page, bash
#               completion)
#   dkms-check  dkms build of the dkms package against the rig kernels' kbuild
#               trees (KERNELS, default all), never the host's /lib/modules; and
#               the path apt takes for a new kernel, with the tool's package's
#               lbscrypt (check --kernel), in a private mount namespace
#
# Packages they need: packaging/host-packages and tools/deps.txt (`make deps`).

DEB_TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
DEB_VERSION := $(strip $(file <$(DEB_TOP)/VERSION))
DEB_BUILD := $(or $(LBS_BUILD),$(abspath $(DEB_TOP)/build))
DEB_HOST_ARCH := $(shell dpkg --print-architecture)
DEB_FILES := $(DEB_BUILD)/dm-crypt-lbs-dkms_$(DEB_VERSION)_all.deb \
	$(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_$(DEB_HOST_ARCH).deb \
	$(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_arm64.deb
DEB_SOURCES := $(DEB_BUILD)/dm-crypt-lbs_$(DEB_VERSION).dsc $(DEB_BUILD)/lbscrypt_$(DEB_VERSION).dsc

# What each source package is made of: a package is built again when one of
# these changed (so deb-lint and dkms-check after deb do not build twice). The
# directories count too: removing a file changes its directory.
DEB_DKMS_INPUTS := $(DEB_TOP)/VERSION $(DEB_TOP)/packaging/build-deb \
	$(shell find $(DEB_TOP)/kmod $(DEB_TOP)/packaging/dkms)
# (the manual pages' sources: as packaging/build-deb stages them)
DEB_TOOL_INPUTS := $(DEB_TOP)/VERSION $(DEB_TOP)/packaging/build-deb $(DEB_TOP)/Documentation \
	$(wildcard $(DEB_TOP)/Documentation/lbscrypt*.rst $(DEB_TOP)/Documentation/*.inc) $(DEB_TOP)/Documentation/dm-crypt-lbs.rst \
	$(shell find $(DEB_TOP)/tools $(DEB_TOP)/tests/unit $(DEB_TOP)/packaging/lbscrypt)

.PHONY: deb deb-dkms deb-tools deb-lint dkms-check

deb: deb-dkms deb-tools
deb-dkms: $(DEB_BUILD)/dm-crypt-lbs-dkms_$(DEB_VERSION)_all.deb
deb-tools: $(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_$(DEB_HOST_ARCH).deb

$(DEB_BUILD)/dm-crypt-lbs-dkms_$(DEB_VERSION)_all.deb $(DEB_BUILD)/dm-crypt-lbs_$(DEB_VERSION).dsc &: $(DEB_DKMS_INPUTS)
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/packaging/build-deb dkms

# The tool is compiled from source again here (build/tools/ is not used), through
# ccache when it is installed (CCACHE_DIR from the top-level Makefile).
$(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_$(DEB_HOST_ARCH).deb $(DEB_BUILD)/lbscrypt_$(DEB_VERSION)_arm64.deb \
		$(DEB_BUILD)/lbscrypt_$(DEB_VERSION).dsc &: $(DEB_TOOL_INPUTS)
	@LBS_BUILD=$(DEB_BUILD) TOOLS_JOBS=$(or $(TOOLS_JOBS),2) $(DEB_TOP)/packaging/build-deb lbscrypt $(DEB_HOST_ARCH) arm64

# lintian's own exit status decides: --fail-on error,warning. Overrides sit in
# packaging/*/debian/*.lintian-overrides, each with its reason.
deb-lint: deb
	@lintian --fail-on error,warning --display-info --pedantic $(DEB_FILES) $(DEB_SOURCES)
	@echo "lintian: no errors or warnings in $(notdir $(DEB_FILES) $(DEB_SOURCES))"
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/tests/deb-check

dkms-check: deb-dkms deb-tools
	@LBS_BUILD=$(DEB_BUILD) $(DEB_TOP)/tests/dkms-check $(KERNELS)
