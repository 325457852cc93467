# Third-party dependencies, as imported targets with lbscrypt:: names.
# fmt is used header-only so the binary needs no libfmt at run time (the arm64 guests
# have none); CLI11 and nlohmann-json are header-only anyway.
# libdevmapper, libcryptsetup and libblkid are found directly, not through pkg-config: their .pc files
# name private dependencies whose -dev packages the arm64 sysroot does not carry.
function(lbscrypt_import_library target header library)
  find_path(${target}_INCLUDE_DIR ${header} REQUIRED)
  find_library(${target}_LIBRARY ${library} REQUIRED)
  add_library(lbscrypt::${target} UNKNOWN IMPORTED)
  set_target_properties(lbscrypt::${target} PROPERTIES
    IMPORTED_LOCATION "${${target}_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${${target}_INCLUDE_DIR}")
endfunction()
lbscrypt_import_library(devmapper libdevmapper.h devmapper)
lbscrypt_import_library(cryptsetup libcryptsetup.h cryptsetup)
lbscrypt_import_library(blkid blkid/blkid.h blkid)
# OpenSSL's libcrypto (PBKDF2 and SHA-256 for reencrypt's key verifiers and journal; libcryptsetup
# links it already). Its openssl/configuration.h is per architecture (include/<multiarch>), a
# directory the cross compiler does not search in the sysroot: found and added here.
lbscrypt_import_library(crypto openssl/evp.h crypto)
find_path(crypto_CONFIG_INCLUDE_DIR openssl/configuration.h REQUIRED)
set_property(TARGET lbscrypt::crypto APPEND PROPERTY
  INTERFACE_INCLUDE_DIRECTORIES "${crypto_CONFIG_INCLUDE_DIR}")
# liblzma and libzstd unpack a kernel's dm-crypt.ko.xz / .ko.zst to read its target's version
# (lbscrypt check --kernel); dpkg needs both, so every Debian system has them.
lbscrypt_import_library(lzma lzma.h lzma)
lbscrypt_import_library(zstd zstd.h zstd)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

add_library(lbscrypt::fmt INTERFACE IMPORTED)
target_link_libraries(lbscrypt::fmt INTERFACE fmt::fmt-header-only)
add_library(lbscrypt::cli11 ALIAS CLI11::CLI11)
add_library(lbscrypt::json ALIAS nlohmann_json::nlohmann_json)
