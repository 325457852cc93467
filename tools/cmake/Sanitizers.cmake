# AddressSanitizer + UndefinedBehaviorSanitizer, enabled with -DLBSCRYPT_SANITIZE=ON.
function(lbscrypt_set_sanitizers target)
  if(LBSCRYPT_SANITIZE)
    set(flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    # -O1, as AddressSanitizer's documentation advises: without optimisation the unit tests'
    # byte loops (the reencrypt engine's cut sweeps) dominate the run (results/make-check.md).
    # GCC's -Wmaybe-uninitialized is unreliable under the sanitizers (GCC 12 flags libstdc++'s
    # own std::regex at -O1 with them): off in this build alone; the others keep it.
    target_compile_options(${target} PRIVATE ${flags} -O1 -Wno-maybe-uninitialized)
    target_link_options(${target} PRIVATE ${flags})
  endif()
endfunction()
