// The TCP handshake: a challenge and a proof of the job's token.
//
// How it works: the acceptor speaks first, sending "DDLTCP1\0", its rank and a 16-byte nonce
// from getrandom(). The initiator checks that it reached the rank it meant to, then answers
// "DDLTCP1\0", its own rank, which stream of how many this connection is, and
// SHA-256(token || nonce || its rank || acceptor's rank || stream || streams). The
// acceptor computes the same digest and, when it matches, sends one byte ('K'); otherwise it
// closes the connection. The token never crosses the network and a recorded hello is useless
// against the next nonce; this keeps out stray, stale and foreign processes, not an attacker
// who can change packets in flight (there is no encryption). Integers are big-endian.

#include "comm/transport/tcp/hello.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "comm/transport/link.h"

namespace ddl::comm::transport::tcp {

namespace {

constexpr char kMagic[8] = {'D', 'D', 'L', 'T', 'C', 'P', '1', '\0'};

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t ch = (e & f) ^ (~e & g);
    const uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
    const uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

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

Digest sha256(std::string_view data) {
  uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t left = data.size();
  for (; left >= 64; left -= 64, p += 64)
    compress(state, p);
  uint8_t tail[128] = {};
  std::memcpy(tail, p, left);
  tail[left] = 0x80;
  const size_t tail_size = left + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i)
    tail[tail_size - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  compress(state, tail);
  if (tail_size == 128) compress(state, tail + 64);
  Digest out;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j)
      out[4 * i + j] = static_cast<uint8_t>(state[i] >> (24 - 8 * j));
  }
  return out;
}

Digest hello_proof(std::string_view token, const Nonce& nonce, int from, int to, int stream,
                   int streams) {
  std::string m(token);
  m.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  for (int v : {from, to, stream, streams})
    put_u32(m, static_cast<uint32_t>(v));
  return sha256(m);
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
