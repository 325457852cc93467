# AddressSanitizer + UndefinedBehaviorSanitizer, enabled with -DLBSCRYPT_SANITIZE=ON.
function(lbscrypt_set_sanitizers target)
  if(LBSCRYPT_SANITIZE)
    set(flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_compile_options(${target} PRIVATE ${flags})
    target_link_options(${target} PRIVATE ${flags})
  endif()
endfunction()
