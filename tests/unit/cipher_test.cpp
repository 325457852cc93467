// SPDX-License-Identifier: GPL-2.0-only
#include <catch2/catch.hpp>

#include "lbscrypt/cipher.hpp"

using lbscrypt::parse_cipher_spec;

TEST_CASE("cipher specifications split into their parts", "[cipher]") {
  const auto xts = parse_cipher_spec("aes-xts-plain64");
  REQUIRE(xts.ok());
  CHECK(xts->cipher == "aes");
  CHECK(xts->chainmode == "xts");
  CHECK(xts->ivmode == "plain64");
  CHECK(xts->ivopts.empty());

  const auto essiv = parse_cipher_spec("twofish-cbc-essiv:sha256");
  REQUIRE(essiv.ok());
  CHECK(essiv->ivmode == "essiv");
  CHECK(essiv->ivopts == "sha256");

  const auto multi = parse_cipher_spec("aes:64-cbc-lmk");
  REQUIRE(multi.ok());
  CHECK(multi->keycount == 64);

  const auto ecb = parse_cipher_spec("cipher_null-ecb");
  REQUIRE(ecb.ok());
  CHECK(ecb->ivmode.empty());

  const auto capi = parse_cipher_spec("capi:authenc(hmac(sha256),xts(aes))-random");
  REQUIRE(capi.ok());
  CHECK(capi->capi);
  CHECK(capi->cipher == "authenc(hmac(sha256),xts(aes))");
  CHECK(capi->ivmode == "random");
}

TEST_CASE("cipher specifications print back as written", "[cipher]") {
  for (const char *text :
       {"aes-xts-plain64", "aes-cbc-essiv:sha256", "aes:64-cbc-lmk", "cipher_null-ecb",
        "capi:xts(aes)-plain64", "serpent-xts-plain64be", "capi:cbc(aes)-essiv:sha256"}) {
    INFO(text);
    const auto spec = parse_cipher_spec(text);
    REQUIRE(spec.ok());
    CHECK(spec->to_string() == text);
  }
}

TEST_CASE("bad cipher specifications are refused with the expected form", "[cipher]") {
  for (const char *text : {"", "aes", "-xts-plain64", "aes:3-xts-plain64", "aes:x-cbc-plain",
                           "aes-cbc", "aes--plain", "capi:", "capi:xts(aes-plain64"}) {
    INFO(text);
    const auto spec = parse_cipher_spec(text);
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.error().message.find("expected cipher[:keycount]") != std::string::npos);
  }
}
