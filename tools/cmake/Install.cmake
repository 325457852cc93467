# What `cmake --install` (and `make install`) puts on a machine, laid out by
# GNUInstallDirs: the Debian package (packaging/lbscrypt/debian) ships exactly
# this, so a file installed here is in the package.
#   sbin/lbscrypt                                  the program
#   share/bash-completion/completions/lbscrypt     tools/completion/lbscrypt
#   share/man/man8/lbscrypt.8                      from Documentation/lbscrypt.rst
#   share/man/man8/lbscrypt-<command>.8            from Documentation/lbscrypt-<command>.rst
#   share/man/man5/lbscrypttab.5                   from Documentation/lbscrypttab.rst
#   share/man/man4/dm-crypt-lbs.4                  from Documentation/dm-crypt-lbs.rst
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

# The manual pages, each from its document in Documentation/ (cmake/manpage.sh adds the header
# fields and the shared option lists, *.inc), then rst2man (python3-docutils): lbscrypt(8),
# lbscrypt-<command>(8) for every command, lbscrypttab(5) and dm-crypt-lbs(4). AUTO builds them
# when rst2man and the documents are there; ON (the package build) fails without them.
set(LBSCRYPT_MANPAGE AUTO CACHE STRING "Build and install the manual pages: ON, OFF or AUTO")
set_property(CACHE LBSCRYPT_MANPAGE PROPERTY STRINGS ON OFF AUTO)
set(_lbs_doc "${CMAKE_CURRENT_SOURCE_DIR}/../Documentation")
file(GLOB _lbs_command_pages CONFIGURE_DEPENDS "${_lbs_doc}/lbscrypt-*.rst")
file(GLOB _lbs_man_includes CONFIGURE_DEPENDS "${_lbs_doc}/*.inc")
set(_lbs_pages "8:${_lbs_doc}/lbscrypt.rst" "5:${_lbs_doc}/lbscrypttab.rst"
               "4:${_lbs_doc}/dm-crypt-lbs.rst")
foreach(_lbs_page IN LISTS _lbs_command_pages)
  list(APPEND _lbs_pages "8:${_lbs_page}")
endforeach()
set(_lbs_missing "")
foreach(_lbs_page IN LISTS _lbs_pages)
  string(REGEX REPLACE "^[0-9]:" "" _lbs_rst "${_lbs_page}")
  if(NOT EXISTS "${_lbs_rst}")
    list(APPEND _lbs_missing "${_lbs_rst}")
  endif()
endforeach()
if(NOT _lbs_command_pages)
  list(APPEND _lbs_missing "${_lbs_doc}/lbscrypt-*.rst")
endif()
if(NOT LBSCRYPT_MANPAGE STREQUAL "OFF")
  find_program(LBSCRYPT_RST2MAN NAMES rst2man rst2man.py)
  if(LBSCRYPT_MANPAGE STREQUAL "ON")
    if(NOT LBSCRYPT_RST2MAN)
      message(FATAL_ERROR "LBSCRYPT_MANPAGE=ON: no rst2man (Debian: python3-docutils)")
    endif()
    if(_lbs_missing)
      message(FATAL_ERROR "LBSCRYPT_MANPAGE=ON: no ${_lbs_missing}")
    endif()
  endif()
  if(LBSCRYPT_RST2MAN AND NOT _lbs_missing)
    set(_lbs_man_files "")
    foreach(_lbs_page IN LISTS _lbs_pages)
      string(REGEX MATCH "^[0-9]" _lbs_section "${_lbs_page}")
      string(REGEX REPLACE "^[0-9]:" "" _lbs_rst "${_lbs_page}")
      get_filename_component(_lbs_name "${_lbs_rst}" NAME_WE)
      set(_lbs_man_rst "${CMAKE_CURRENT_BINARY_DIR}/man/${_lbs_name}.man.rst")
      set(_lbs_man "${CMAKE_CURRENT_BINARY_DIR}/man/${_lbs_name}.${_lbs_section}")
      add_custom_command(OUTPUT "${_lbs_man}"
        COMMAND "${CMAKE_COMMAND}" -E make_directory "${CMAKE_CURRENT_BINARY_DIR}/man"
        COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/cmake/manpage.sh" "${_lbs_section}" "${_lbs_rst}"
                "${PROJECT_VERSION}" "${_lbs_man_rst}"
        COMMAND "${LBSCRYPT_RST2MAN}" --strict "${_lbs_man_rst}" "${_lbs_man}"
        DEPENDS "${_lbs_rst}" ${_lbs_man_includes} "${CMAKE_CURRENT_SOURCE_DIR}/cmake/manpage.sh"
        COMMENT "${_lbs_name}(${_lbs_section}) from Documentation/${_lbs_name}.rst"
        VERBATIM)
      install(FILES "${_lbs_man}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man${_lbs_section}")
      list(APPEND _lbs_man_files "${_lbs_man}")
    endforeach()
    add_custom_target(lbscrypt_manpages ALL DEPENDS ${_lbs_man_files})
  else()
    message(STATUS "The manual pages are not built: they need rst2man and ${_lbs_doc}")
  endif()
endif()
