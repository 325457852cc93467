# Debian's hardening build flags (as dpkg-buildflags gives a package): stack
# protector, fortified libc calls where the build optimises, full RELRO with
# immediate binding. The packages are built from these binaries.
function(lbscrypt_set_hardening target)
  target_compile_options(${target} PRIVATE -fstack-protector-strong
    $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
  target_link_options(${target} PRIVATE LINKER:-z,relro LINKER:-z,now)
endfunction()
