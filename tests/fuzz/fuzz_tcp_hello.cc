// libFuzzer target for libddl's TCP handshake (comm/transport/tcp/hello.h), which any process
// that reaches a rank's port can speak. The first byte picks the side (its value modulo 3):
//   0  the decoders alone: decode_hello and decode_challenge of the rest; one accepted must
//      encode back to exactly its bytes, and only the exact sizes are accepted;
//   1  a stranger at a real acceptor (make_tcp_device, rank 1, on 127.0.0.1): the fuzzer reads
//      the challenge, sends the rest in pieces and shuts its side; the acceptor must close the
//      connection without accepting it (no 'K': the stranger cannot know the proof; at most
//      its refusal, 'N'), within its hello time, whatever came;
//   2  an initiator that knows the token: a hello with the right proof for the challenge's
//      nonce, whose initiator rank, stream and stream count come from the input, then the rest
//      of the input; the acceptor must answer 'K' exactly when the numbers are valid (rank 0,
//      below the acceptor's; 1 <= streams <= 64; stream < streams) and refuse ('N' or
//      nothing) and close otherwise.
// Nothing may escape, crash or hang; a connection neither answered nor closed within 8 s is a
// bug (the acceptor's hello time is 5 s).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "comm/transport/link.h"
#include "comm/transport/tcp/hello.h"
#include "tests/fuzz/fuzz_socket.h"

namespace {

using ddl::fuzz::connect_loopback;
using ddl::fuzz::readable;
using ddl::fuzz::send_pieces;

namespace tcp = ddl::comm::transport::tcp;
using ddl::comm::transport::Device;
using ddl::comm::transport::DeviceOptions;

constexpr const char* kToken = "fuzz-token";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tcp_hello: %s\n", what);
  std::abort();
}

void decoders(std::string_view bytes) {
  if (const std::optional<tcp::Hello> h = tcp::decode_hello(bytes)) {
    if (bytes.size() != tcp::kHelloSize) fail("a hello of the wrong size was accepted");
    if (tcp::encode(*h) != bytes) fail("a hello does not encode back to its bytes");
  }
  if (const std::optional<tcp::Challenge> c = tcp::decode_challenge(bytes)) {
    if (bytes.size() != tcp::kChallengeSize) fail("a challenge of the wrong size was accepted");
    if (tcp::encode(*c) != bytes) fail("a challenge does not encode back to its bytes");
  }
}

/// The acceptor every run talks to, and its port.
int acceptor_port() {
  static const std::unique_ptr<Device> device = [] {
    DeviceOptions o;
    o.rank = 1;
    o.token = kToken;
    o.bind_address = "127.0.0.1";
    return ddl::comm::transport::make_tcp_device(o);
  }();
  static const int port = std::stoi(device->address().substr(device->address().rfind(':') + 1));
  return port;
}

/// Reads up to `n` bytes before kWaitMs; what came, and whether the peer closed.
std::string read_some(int fd, size_t n, bool& closed) {
  std::string got;
  closed = false;
  while (got.size() < n) {
    if (!readable(fd)) fail("the acceptor neither answered nor closed in time");
    char buf[64];
    const ssize_t k = ::recv(fd, buf, std::min(sizeof buf, n - got.size()), 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(k));
  }
  return got;
}

/// Sends `bytes` in pieces of growing size (the acceptor reads what has come each time).
void at_acceptor(std::string_view input, bool knows_token) {
  const int fd = connect_loopback(acceptor_port(), "the acceptor");
  bool closed = false;
  const std::optional<tcp::Challenge> c =
      tcp::decode_challenge(read_some(fd, tcp::kChallengeSize, closed));
  if (!c || c->acceptor != 1) fail("the acceptor's challenge is not one");
  bool valid = false;
  std::string sent(input);
  if (knows_token && input.size() >= 8) {
    tcp::Hello h;
    h.initiator = static_cast<int>(static_cast<int8_t>(input[0]));
    h.stream = static_cast<uint8_t>(input[1]) | (static_cast<uint8_t>(input[2]) << 8);
    h.streams = static_cast<uint8_t>(input[3]) % 80;
    h.proof = tcp::hello_proof(kToken, c->nonce, h.initiator, 1, h.stream, h.streams);
    valid = h.initiator == 0 && h.streams >= 1 && h.streams <= 64 && h.stream < h.streams;
    sent = tcp::encode(h) + std::string(input.substr(8));
  }
  send_pieces(fd, sent);
  ::shutdown(fd, SHUT_WR);
  const std::string answer = read_some(fd, 1, closed);
  if (answer == "K" && !valid) fail("the acceptor accepted a hello it should have refused");
  if (valid && answer != "K") fail("the acceptor refused a right hello");
  if (!valid) {
    read_some(fd, 1, closed);
    if (!closed) fail("the acceptor sent more than its refusal");
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      decoders(rest);
      break;
    case 1:
      at_acceptor(rest, false);
      break;
    default:
      at_acceptor(rest, true);
      break;
  }
  return 0;
}
