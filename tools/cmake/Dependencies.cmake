# Third-party dependencies, as imported targets with lbscrypt:: names.
# fmt is used header-only so the binary needs no libfmt at run time (the arm64 guests
# have none); CLI11 and nlohmann-json are header-only anyway.
find_package(PkgConfig REQUIRED)
pkg_check_modules(DEVMAPPER REQUIRED IMPORTED_TARGET devmapper)
pkg_check_modules(CRYPTSETUP REQUIRED IMPORTED_TARGET libcryptsetup)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

add_library(lbscrypt::devmapper ALIAS PkgConfig::DEVMAPPER)
add_library(lbscrypt::cryptsetup ALIAS PkgConfig::CRYPTSETUP)
add_library(lbscrypt::fmt INTERFACE IMPORTED)
target_link_libraries(lbscrypt::fmt INTERFACE fmt::fmt-header-only)
add_library(lbscrypt::cli11 ALIAS CLI11::CLI11)
add_library(lbscrypt::json ALIAS nlohmann_json::nlohmann_json)
