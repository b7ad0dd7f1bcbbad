// The challenge handshake (how it works in handshake.h).

#include "base/net/handshake.h"

#include <algorithm>

#include "base/digest.h"
#include "base/text.h"

namespace ddl::base::net {

std::string nonce() {
  return random_bytes(kNonceSize);
}

std::string proof(std::string_view secret, std::string_view label, std::string_view context) {
  std::string message(label);
  message.append(context);
  return bytes(hmac_sha256(secret, message));
}

bool proves(std::string_view got, std::string_view secret, std::string_view label,
            std::string_view context) {
  return same_secret(got, proof(secret, label, context));
}

bool may_speak(std::string_view got, std::string_view magic) {
  const size_t n = std::min(got.size(), magic.size());
  return got.substr(0, n) == magic.substr(0, n);
}

std::optional<std::string_view> after_magic(std::string_view got, std::string_view magic,
                                            size_t size) {
  if (got.size() != size || !got.starts_with(magic)) return std::nullopt;
  return got.substr(magic.size());
}

}  // namespace ddl::base::net
