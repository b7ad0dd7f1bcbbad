// The TCP handshake: a challenge and a proof of the job's token.
//
// How it works: base/net/handshake.h's challenge. The acceptor speaks first, sending
// "DDLTCP2\0", its rank and a fresh nonce. The initiator checks that it reached the rank it
// meant to, then answers "DDLTCP2\0", its own rank, which stream of how many this connection
// is, and base::net::proof(token, "libddl tcp hello: ", nonce || its rank || acceptor's rank
// || stream || streams). The acceptor computes the same proof and, when it matches, sends one
// byte ('K'); otherwise it sends 'N' and closes the connection. Integers are big-endian
// (base/net/codec.h).

#include "comm/transport/tcp/hello.h"

#include "base/net/codec.h"
#include "base/net/handshake.h"

namespace ddl::comm::transport::tcp {

namespace {

constexpr std::string_view kMagic("DDLTCP2\0", 8);
constexpr std::string_view kLabel = "libddl tcp hello: ";
constexpr size_t kProofSize = 32;

}  // namespace

std::string hello_proof(std::string_view token, std::string_view nonce, int from, int to,
                        int stream, int streams) {
  std::string context(nonce);
  for (int v : {from, to, stream, streams})
    base::net::put_u32(context, static_cast<uint32_t>(v));
  return base::net::proof(token, kLabel, context);
}

std::string encode(const Challenge& c) {
  std::string out(kMagic);
  base::net::put_u32(out, static_cast<uint32_t>(c.acceptor));
  out += c.nonce;
  return out;
}

std::string encode(const Hello& h) {
  std::string out(kMagic);
  base::net::put_u32(out, static_cast<uint32_t>(h.initiator));
  base::net::put_u16(out, static_cast<uint16_t>(h.stream));
  base::net::put_u16(out, static_cast<uint16_t>(h.streams));
  out += h.proof;
  return out;
}

std::optional<Challenge> decode_challenge(std::string_view bytes) {
  const auto rest = base::net::after_magic(bytes, kMagic, kChallengeSize);
  if (!rest) return std::nullopt;
  base::net::Decoder in(*rest, "challenge");
  Challenge c;
  c.acceptor = in.i32();
  c.nonce = in.bytes(base::net::kNonceSize);
  return c;
}

std::optional<Hello> decode_hello(std::string_view bytes) {
  const auto rest = base::net::after_magic(bytes, kMagic, kHelloSize);
  if (!rest) return std::nullopt;
  base::net::Decoder in(*rest, "hello");
  Hello h;
  h.initiator = in.i32();
  h.stream = in.u16();
  h.streams = in.u16();
  h.proof = in.bytes(kProofSize);
  return h;
}

}  // namespace ddl::comm::transport::tcp
