# Cross toolchain for the arm64 guests: Debian's aarch64-linux-gnu-g++ with its own libc and
# libstdc++, plus a sysroot of arm64 -dev packages (tools/cmake/arm64-sysroot.sh) for
# libdevmapper, libcryptsetup and the header-only libraries.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT LBSCRYPT_SYSROOT)
  set(LBSCRYPT_SYSROOT "$ENV{LBSCRYPT_SYSROOT}")
endif()
if(NOT LBSCRYPT_SYSROOT)
  message(FATAL_ERROR "set LBSCRYPT_SYSROOT to the arm64 sysroot (tools/cmake/arm64-sysroot.sh)")
endif()
set(ENV{LBSCRYPT_SYSROOT} "${LBSCRYPT_SYSROOT}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LBSCRYPT_SYSROOT)

set(CMAKE_FIND_ROOT_PATH "${LBSCRYPT_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(ENV{PKG_CONFIG_LIBDIR}
    "${LBSCRYPT_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${LBSCRYPT_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${LBSCRYPT_SYSROOT}")

set(_lbs_libdirs
    "${LBSCRYPT_SYSROOT}/lib/aarch64-linux-gnu"
    "${LBSCRYPT_SYSROOT}/usr/lib/aarch64-linux-gnu")
string(JOIN ":" _lbs_rpath_link ${_lbs_libdirs})
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_lbs_rpath_link}")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${LBSCRYPT_SYSROOT}/usr/include")

# The binary runs on arm64 machines, never from the build tree: no build RPATH
# into the sysroot (lintian: custom-library-search-path in the arm64 package).
set(CMAKE_SKIP_BUILD_RPATH ON)
