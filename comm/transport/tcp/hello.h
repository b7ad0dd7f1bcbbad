#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.h"

namespace ddl::comm::transport::tcp {

// The handshake that opens every TCP connection between two ranks (see hello.cc).

/// A SHA-256 digest.
using Digest = base::Digest;
/// The acceptor's random challenge (base::net::kNonceSize bytes).
using Nonce = std::string;

using base::sha256;

/// What the initiator proves it knows the token with (base::net::proof): the nonce, both
/// ranks and the connection's stream index and count under the token.
std::string hello_proof(std::string_view token, std::string_view nonce, int from, int to,
                        int stream, int streams);

/// The acceptor's first message: magic, its rank, a fresh nonce.
constexpr size_t kChallengeSize = 8 + 4 + 16;
/// The initiator's answer: magic, its rank, the connection's stream index and count, its proof.
constexpr size_t kHelloSize = 8 + 4 + 2 + 2 + 32;
/// The acceptor's last byte, sent when the hello is right.
constexpr char kAccepted = 'K';
/// The acceptor's last byte, sent when the hello is wrong (a wrong token, rank or count)
/// before it closes the connection. A connection closed without either byte was crowded out,
/// not refused: the initiator tries again.
constexpr char kRefused = 'N';

struct Challenge {
  int acceptor = 0;
  Nonce nonce;
};
struct Hello {
  int initiator = 0;
  int stream = 0;   ///< which of the link's sockets this connection is
  int streams = 1;  ///< how many sockets the link has
  std::string proof;
};

std::string encode(const Challenge& c);
std::string encode(const Hello& h);
/// std::nullopt when `bytes` (exactly k...Size long) does not start with the magic.
std::optional<Challenge> decode_challenge(std::string_view bytes);
std::optional<Hello> decode_hello(std::string_view bytes);

}  // namespace ddl::comm::transport::tcp
