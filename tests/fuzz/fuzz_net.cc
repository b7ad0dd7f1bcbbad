// libFuzzer target for the network pieces every server and client shares (base/net): the
// codec and the handshake's parsers. The first byte picks the piece:
//   0  base::net::Decoder reading u16, u32, str, count and bytes in an order the input picks:
//      only std::runtime_error may escape, and never past the input's end;
//   1  base::net::FieldsReader with small limits, fed in pieces whose sizes come from the
//      input: only std::runtime_error may escape, and every message taken must encode back to
//      exactly the bytes it came from;
//   2  base::net::InBuffer: bytes added and taken in pieces come out in order, none lost;
//   3  the handshake's parsers (may_speak, after_magic) and proof checks: a proof is accepted
//      only when it is the one for that secret, label and context.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/net/codec.h"
#include "base/net/handshake.h"

namespace {

using namespace ddl::base::net;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_net: %s\n", what);
  std::abort();
}

void decode(std::string_view bytes) {
  if (bytes.empty()) return;
  const std::string_view ops = bytes.substr(0, std::min<size_t>(bytes[0] & 15, bytes.size()));
  Decoder in(bytes.substr(ops.size()), "fuzz");
  try {
    for (char op : ops) {
      switch (static_cast<unsigned char>(op) % 5) {
        case 0:
          (void)in.u16();
          break;
        case 1:
          (void)in.u32();
          break;
        case 2:
          (void)in.str();
          break;
        case 3:
          (void)in.count(static_cast<unsigned char>(op) >> 3);
          break;
        default:
          (void)in.bytes(static_cast<unsigned char>(op) >> 3);
          break;
      }
    }
    in.expect_done();
  } catch (const std::runtime_error&) {
  }
}

void read_fields(std::string_view bytes) {
  FieldsReader reader(4096, 16);
  std::string consumed, taken;
  size_t at = 0, step = 1;
  try {
    while (at < bytes.size()) {
      const size_t n = std::min({step, bytes.size() - at, reader.room()});
      reader.add(bytes.substr(at, n));
      consumed.append(bytes.substr(at, n));
      at += n;
      step = step * 3 % 1031 + 1;
      while (std::optional<Fields> m = reader.take())
        taken += encode(m->type, m->fields);
    }
  } catch (const std::runtime_error&) {
    return;
  }
  if (consumed.compare(0, taken.size(), taken) != 0) fail("a message does not encode back");
}

void buffer(std::string_view bytes) {
  InBuffer in;
  std::string out;
  size_t at = 0;
  for (size_t i = 0; at < bytes.size(); ++i) {
    const size_t n =
        std::min<size_t>(static_cast<unsigned char>(bytes[at]) % 17 + 1, bytes.size() - at);
    in.add(bytes.substr(at, n));
    at += n;
    const size_t k = (i * 7) % (in.pending().size() + 1);
    out.append(in.pending().substr(0, k));
    in.take(k);
  }
  out += in.take_rest();
  if (out != bytes) fail("an InBuffer lost or reordered bytes");
}

void handshake(std::string_view bytes) {
  const std::string_view magic = "DDLRV2";
  const bool speaks = may_speak(bytes, magic);
  if (speaks != (bytes.substr(0, std::min(bytes.size(), magic.size())) ==
                 magic.substr(0, std::min(bytes.size(), magic.size())))) {
    fail("may_speak disagrees with the magic's prefix");
  }
  if (const auto rest = after_magic(bytes, magic, bytes.size())) {
    if (!speaks || rest->size() + magic.size() != bytes.size()) fail("after_magic is wrong");
  }
  const std::string_view nonce = bytes.substr(0, std::min<size_t>(bytes.size(), kNonceSize));
  const std::string_view got = bytes.substr(nonce.size());
  if (proves(got, "fuzz-secret", "fuzz: ", nonce) && got != proof("fuzz-secret", "fuzz: ", nonce))
    fail("a wrong proof was accepted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      decode(bytes);
      break;
    case 1:
      read_fields(bytes);
      break;
    case 2:
      buffer(bytes);
      break;
    default:
      handshake(bytes);
      break;
  }
  return 0;
}
