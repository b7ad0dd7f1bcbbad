#pragma once
// Digests and proofs of a shared secret: SHA-256, HMAC-SHA256, random nonces.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddl::base {

/// A SHA-256 digest.
using Digest = std::array<uint8_t, 32>;

/// SHA-256 of `data` (FIPS 180-4).
Digest sha256(std::string_view data);

/// HMAC-SHA256 of `message` under `key` (RFC 2104): what a side sends to prove it knows `key`
/// without sending it; an eavesdropper learns nothing it can replay against a fresh nonce.
Digest hmac_sha256(std::string_view key, std::string_view message);

/// `size` bytes from getrandom(); throws std::runtime_error when the kernel gives none.
std::string random_bytes(size_t size);

/// Lower-case hexadecimal of `bytes` ("0a1b...").
std::string hex(std::string_view bytes);
std::string hex(const Digest& digest);

/// The digest as raw bytes (32 of them).
std::string bytes(const Digest& digest);

}  // namespace ddl::base
