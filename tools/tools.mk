# tools/tools.mk: lbscrypt build and test targets. Included by the top-level Makefile; on its
# own: `make -f tools/tools.mk TARGET` from the repository root.
#
#   tools-configure  host build's CMake configuration (its compile_commands.json)
#   tools        host build: build/tools/host/lbscrypt and the unit tests
#   tools-bin    host build of build/tools/host/lbscrypt alone (make matrix's
#                amd64 guests)
#   tools-test   host build + unit tests (ctest), no guest
#   tools-asan   ASan + UBSan build of the unit tests in build/tools/asan + ctest
#                (tools-asan-build: the build alone); TOOLS_ASAN_SLOW=no leaves out the
#                cases tagged [slow] (ctest label slow), as make check does
#   tools-format clang-format --dry-run -Werror over tools/ and tests/unit/
#   tools-lint   tools-format, then clang-tidy over tools/src and tests/unit/
#   tools-arm64  cross build for the arm64 guests: build/tools/arm64/lbscrypt

TOOLS_SRC_DIR := tools
TOOLS_BUILD_DIR := build/tools
TOOLS_JOBS ?= 2
# ccache (CCACHE_DIR under the rig's cache, set by the top-level Makefile) makes a
# clean checkout's builds cheap on a machine that built them before.
TOOLS_CMAKE_FLAGS ?= $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
TOOLS_SOURCES = $(shell find tools/include tools/src tests/unit -name '*.hpp' -o -name '*.cpp')
# What tools-lint tidies (make check-full: all of it; make check tidies nothing, see
# Documentation/testing.rst).
TOOLS_TIDY_DIRS ?= tools/src tests/unit
TOOLS_TIDY_SOURCES = $(shell find $(TOOLS_TIDY_DIRS) -name '*.cpp')

.PHONY: tools tools-bin tools-configure tools-test tools-asan-build tools-asan tools-format tools-lint tools-arm64

tools-configure:
	@cmake -S $(TOOLS_SRC_DIR) -B $(TOOLS_BUILD_DIR)/host -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLBSCRYPT_UNITY=OFF $(TOOLS_CMAKE_FLAGS) >/dev/null

tools: tools-configure
	@cmake --build $(TOOLS_BUILD_DIR)/host -j $(TOOLS_JOBS)

tools-bin: tools-configure
	@cmake --build $(TOOLS_BUILD_DIR)/host -j $(TOOLS_JOBS) --target lbscrypt

tools-test: tools
	@ctest --test-dir $(TOOLS_BUILD_DIR)/host --output-on-failure -j $(TOOLS_JOBS)

tools-asan-build:
	@cmake -S $(TOOLS_SRC_DIR) -B $(TOOLS_BUILD_DIR)/asan -DCMAKE_BUILD_TYPE=Debug -DLBSCRYPT_SANITIZE=ON $(TOOLS_CMAKE_FLAGS) >/dev/null
	@cmake --build $(TOOLS_BUILD_DIR)/asan -j $(TOOLS_JOBS)

tools-asan: tools-asan-build
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir $(TOOLS_BUILD_DIR)/asan --output-on-failure -j $(TOOLS_JOBS) \
		$(if $(filter no,$(TOOLS_ASAN_SLOW)),-LE slow)

# clang-tidy needs the compile database of the host build (its configuration, not
# its objects); tools/cmake/tidy.sh runs two files at a time and remembers the
# files it found clean (in the rig's cache).
tools-format:
	@clang-format --style=file:tools/.clang-format --dry-run -Werror $(TOOLS_SOURCES)
	@echo "tools-format: clean ($(words $(TOOLS_SOURCES)) files)"

tools-lint: tools-format tools-configure
	@tools/cmake/tidy.sh $(TOOLS_BUILD_DIR)/host $(TOOLS_TIDY_SOURCES)
	@echo "tools-lint: clean"

tools-arm64:
	@sysroot=$$(tools/cmake/arm64-sysroot.sh tools/arm64-sysroot.txt) && \
	cmake -S $(TOOLS_SRC_DIR) -B $(TOOLS_BUILD_DIR)/arm64 -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/tools/cmake/aarch64-linux-gnu.cmake \
		-DLBSCRYPT_SYSROOT=$$sysroot -DLBSCRYPT_TESTS=OFF $(TOOLS_CMAKE_FLAGS) >/dev/null
	@cmake --build $(TOOLS_BUILD_DIR)/arm64 -j $(TOOLS_JOBS) --target lbscrypt
