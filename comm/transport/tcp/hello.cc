// The TCP handshake: a challenge and a proof of the job's token.
//
// How it works: the acceptor speaks first, sending "DDLTCP1\0", its rank and a 16-byte nonce
// from getrandom(). The initiator checks that it reached the rank it meant to, then answers
// "DDLTCP1\0", its own rank, which stream of how many this connection is, and
// SHA-256(token || nonce || its rank || acceptor's rank || stream || streams). The
// acceptor computes the same digest and, when it matches, sends one byte ('K'); otherwise it
// sends 'N' and closes the connection. The token never crosses the network and a recorded hello is
// useless against the next nonce; this keeps out stray, stale and foreign processes, not an
// attacker who can change packets in flight (there is no encryption). Integers are big-endian.

#include "comm/transport/tcp/hello.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/digest.h"
#include "comm/transport/link.h"

namespace ddl::comm::transport::tcp {

namespace {

constexpr char kMagic[8] = {'D', 'D', 'L', 'T', 'C', 'P', '1', '\0'};

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

uint32_t get_u32(std::string_view in, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i)
    v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

bool has_magic(std::string_view bytes) {
  return bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0;
}

}  // namespace

Digest hello_proof(std::string_view token, const Nonce& nonce, int from, int to, int stream,
                   int streams) {
  std::string m(token);
  m.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  for (int v : {from, to, stream, streams})
    put_u32(m, static_cast<uint32_t>(v));
  return base::sha256(m);
}

Nonce random_nonce() {
  Nonce n;
  size_t got = 0;
  while (got < n.size()) {
    const ssize_t k = getrandom(n.data() + got, n.size() - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw TransportError(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(k);
  }
  return n;
}

std::string encode(const Challenge& c) {
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, static_cast<uint32_t>(c.acceptor));
  out.append(reinterpret_cast<const char*>(c.nonce.data()), c.nonce.size());
  return out;
}

std::string encode(const Hello& h) {
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, static_cast<uint32_t>(h.initiator));
  put_u16(out, static_cast<uint16_t>(h.stream));
  put_u16(out, static_cast<uint16_t>(h.streams));
  out.append(reinterpret_cast<const char*>(h.proof.data()), h.proof.size());
  return out;
}

std::optional<Challenge> decode_challenge(std::string_view bytes) {
  if (bytes.size() != kChallengeSize || !has_magic(bytes)) return std::nullopt;
  Challenge c;
  c.acceptor = static_cast<int>(get_u32(bytes, 8));
  std::memcpy(c.nonce.data(), bytes.data() + 12, c.nonce.size());
  return c;
}

std::optional<Hello> decode_hello(std::string_view bytes) {
  if (bytes.size() != kHelloSize || !has_magic(bytes)) return std::nullopt;
  Hello h;
  h.initiator = static_cast<int>(get_u32(bytes, 8));
  h.stream = static_cast<int>(get_u32(bytes, 12) >> 16);
  h.streams = static_cast<int>(get_u32(bytes, 12) & 0xffff);
  std::memcpy(h.proof.data(), bytes.data() + 16, h.proof.size());
  return h;
}

}  // namespace ddl::comm::transport::tcp
