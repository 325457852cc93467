# What `cmake --install` (and `make install`) puts on a machine, laid out by
# GNUInstallDirs: the Debian package (packaging/lbscrypt/debian) ships exactly
# this, so a file installed here is in the package.
#   sbin/lbscrypt                                  the program
#   share/bash-completion/completions/lbscrypt     tools/completion/lbscrypt
#   share/man/man8/lbscrypt.8                      from Documentation/lbscrypt.rst
#   share/man/man5/lbscrypttab.5                   from Documentation/lbscrypttab.rst
#   lib/systemd/system-generators/lbscrypt-generator  a link to sbin/lbscrypt
#   share/initramfs-tools/hooks/lbscrypt           tools/initramfs/hook
#   share/initramfs-tools/scripts/local-top/lbscrypt  tools/initramfs/local-top
#   share/initramfs-tools/scripts/local-block/lbscrypt  tools/initramfs/local-block
#   /etc/lbscrypt/initramfs.conf                   tools/initramfs/initramfs.conf (the hook's)
include(GNUInstallDirs)

# The systemd generator (lbscrypttab(5)) is lbscrypt itself under another name: main.cpp runs
# `generate-units` when argv[0] is lbscrypt-generator. systemd reads
# /usr/lib/systemd/system-generators (and /usr/local/lib/...), not a GNUInstallDirs libdir.
set(LBSCRYPT_GENERATOR_DIR "lib/systemd/system-generators" CACHE STRING
    "systemd system generator directory, relative to the install prefix")
file(RELATIVE_PATH _lbs_generator_to_tool
     "${CMAKE_INSTALL_PREFIX}/${LBSCRYPT_GENERATOR_DIR}"
     "${CMAKE_INSTALL_FULL_SBINDIR}/lbscrypt")
install(CODE "
  set(link \"\$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${LBSCRYPT_GENERATOR_DIR}/lbscrypt-generator\")
  file(MAKE_DIRECTORY \"\$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${LBSCRYPT_GENERATOR_DIR}\")
  file(CREATE_LINK \"${_lbs_generator_to_tool}\" \"\${link}\" SYMBOLIC)
  message(STATUS \"Installing: \${link} -> ${_lbs_generator_to_tool}\")
")

# initramfs-tools (Debian): the x-initrd.attach volumes of lbscrypttab, the root's among
# them, opened before the root is mounted. initramfs-tools reads /usr/share/initramfs-tools
# only, so these are for a /usr prefix.
install(PROGRAMS "${CMAKE_CURRENT_SOURCE_DIR}/initramfs/hook"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/initramfs-tools/hooks" RENAME lbscrypt)
install(PROGRAMS "${CMAKE_CURRENT_SOURCE_DIR}/initramfs/local-top"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/initramfs-tools/scripts/local-top" RENAME lbscrypt)
install(PROGRAMS "${CMAKE_CURRENT_SOURCE_DIR}/initramfs/local-block"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/initramfs-tools/scripts/local-block" RENAME lbscrypt)
# The hook's configuration (KEYFILE_PATTERN), where it reads it: the full sysconfdir, /etc for
# a /usr prefix (a conffile in the package).
install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/initramfs/initramfs.conf"
        DESTINATION "${CMAKE_INSTALL_FULL_SYSCONFDIR}/lbscrypt")

install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/completion/lbscrypt"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/bash-completion/completions")

# lbscrypt(8): Documentation/lbscrypt.rst rearranged (cmake/manpage.sh), then
# rst2man (python3-docutils). AUTO builds it when rst2man and the document are
# there; ON (the package build) fails without them.
set(LBSCRYPT_MANPAGE AUTO CACHE STRING "Build and install lbscrypt(8): ON, OFF or AUTO")
set_property(CACHE LBSCRYPT_MANPAGE PROPERTY STRINGS ON OFF AUTO)
set(_lbs_rst "${CMAKE_CURRENT_SOURCE_DIR}/../Documentation/lbscrypt.rst")
if(NOT LBSCRYPT_MANPAGE STREQUAL "OFF")
  find_program(LBSCRYPT_RST2MAN NAMES rst2man rst2man.py)
  if(LBSCRYPT_MANPAGE STREQUAL "ON")
    if(NOT LBSCRYPT_RST2MAN)
      message(FATAL_ERROR "LBSCRYPT_MANPAGE=ON: no rst2man (Debian: python3-docutils)")
    endif()
    if(NOT EXISTS "${_lbs_rst}")
      message(FATAL_ERROR "LBSCRYPT_MANPAGE=ON: no ${_lbs_rst}")
    endif()
  endif()
  if(LBSCRYPT_RST2MAN AND EXISTS "${_lbs_rst}" AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/../Documentation/lbscrypttab.rst")
    set(_lbs_man_rst "${CMAKE_CURRENT_BINARY_DIR}/lbscrypt.man.rst")
    set(_lbs_man "${CMAKE_CURRENT_BINARY_DIR}/lbscrypt.8")
    add_custom_command(OUTPUT "${_lbs_man}"
      COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/cmake/manpage.sh" "${_lbs_rst}" "${PROJECT_VERSION}"
              "${_lbs_man_rst}"
      COMMAND "${LBSCRYPT_RST2MAN}" --strict "${_lbs_man_rst}" "${_lbs_man}"
      DEPENDS "${_lbs_rst}" "${CMAKE_CURRENT_SOURCE_DIR}/cmake/manpage.sh"
      COMMENT "lbscrypt(8) from Documentation/lbscrypt.rst"
      VERBATIM)
    add_custom_target(lbscrypt_manpage ALL DEPENDS "${_lbs_man}")
    install(FILES "${_lbs_man}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man8")
    # lbscrypttab(5): Documentation/lbscrypttab.rst with the header fields (cmake/tabpage.sh)
    set(_lbs_tab_rst "${CMAKE_CURRENT_SOURCE_DIR}/../Documentation/lbscrypttab.rst")
    set(_lbs_tab_man_rst "${CMAKE_CURRENT_BINARY_DIR}/lbscrypttab.man.rst")
    set(_lbs_tab_man "${CMAKE_CURRENT_BINARY_DIR}/lbscrypttab.5")
    add_custom_command(OUTPUT "${_lbs_tab_man}"
      COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/cmake/tabpage.sh" "${_lbs_tab_rst}" "${PROJECT_VERSION}"
              "${_lbs_tab_man_rst}"
      COMMAND "${LBSCRYPT_RST2MAN}" --strict "${_lbs_tab_man_rst}" "${_lbs_tab_man}"
      DEPENDS "${_lbs_tab_rst}" "${CMAKE_CURRENT_SOURCE_DIR}/cmake/tabpage.sh"
      COMMENT "lbscrypttab(5) from Documentation/lbscrypttab.rst"
      VERBATIM)
    add_custom_target(lbscrypttab_manpage ALL DEPENDS "${_lbs_tab_man}")
    install(FILES "${_lbs_tab_man}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man5")
  else()
    message(STATUS "lbscrypt(8) not built: needs rst2man and ${_lbs_rst}")
  endif()
endif()
