// libFuzzer target for per-node mode's rendezvous wire format (ddlrun/per_node/node_wire.h), both
// sides, before and after authentication. The first byte picks the side:
//   0  node 0 before a hello is accepted: wire::Reader with the hello's limits, fed in pieces
//      whose sizes come from the input; only std::runtime_error may escape, and every message
//      taken must encode back to exactly the bytes it came from;
//   1  the same with the limits of an admitted node;
//   2  a node reading node 0's challenge and welcome (decode_challenge, decode_welcome with a
//      secret): only RendezvousError may escape, and a welcome accepted must have proved the
//      secret.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ddlrun/per_node/node_wire.h"
#include "ddlrun/per_node/rendezvous.h"

namespace {

using namespace ddl::ddlrun;

void read_messages(std::string_view bytes, bool admitted) {
  wire::Reader reader =
      admitted ? wire::Reader() : wire::Reader(wire::kMaxHello, wire::kMaxHelloFields);
  std::string consumed, taken;
  size_t at = 0, step = 1;
  try {
    while (at < bytes.size()) {
      const size_t n = std::min(step, bytes.size() - at);
      reader.add(bytes.substr(at, n));
      consumed.append(bytes.substr(at, n));
      at += n;
      step = step * 3 % 1031 + 1;
      while (std::optional<wire::Message> m = reader.take())
        taken += wire::encode(m->type, m->fields);
    }
  } catch (const std::runtime_error&) {
    return;
  }
  if (consumed.compare(0, taken.size(), taken) != 0) {
    std::fprintf(stderr, "fuzz_node_wire: a message does not encode back to its bytes\n");
    std::abort();
  }
}

void read_as_node(std::string_view bytes) {
  wire::Reader reader;
  reader.add(bytes);
  const std::string nonce(wire::kNonceSize, 'n');
  try {
    while (std::optional<wire::Message> m = reader.take()) {
      (void)wire::decode_challenge(*m);
      const Welcome w = wire::decode_welcome(*m, "fuzz-secret", nonce, nonce);
      if (m->fields[0] != wire::proof("fuzz-secret", "node 0", nonce, nonce)) {
        std::fprintf(stderr, "fuzz_node_wire: a welcome without the proof was accepted\n");
        std::abort();
      }
      (void)w;
    }
  } catch (const RendezvousError&) {
  } catch (const std::runtime_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      read_messages(bytes, false);
      break;
    case 1:
      read_messages(bytes, true);
      break;
    default:
      read_as_node(bytes);
      break;
  }
  return 0;
}
