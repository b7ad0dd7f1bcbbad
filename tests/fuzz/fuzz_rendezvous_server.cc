// libFuzzer target for libddl's rendezvous server (comm/bootstrap/rendezvous.cc), which ddlrun
// runs on a port of every address for the ranks' meeting: any process that reaches the port
// can speak to it. One server (a job of 1 rank, on 127.0.0.1) serves every run; the first byte
// picks the speaker (its value modulo 2):
//   0  a stranger: the fuzzer reads the challenge, sends the rest in pieces and shuts its side;
//      the server must never answer it a round (status 0), and must close the connection
//      (after, at most, one failed round saying why it was refused);
//   1  a rank that knows the token: a hello with the right HMAC for the challenge's nonce,
//      whose rank and job size come from the next two bytes (only rank 0 of a job of 1 is
//      valid), then the rest of the input as rounds (round, wait, length, value); every
//      answer must be a whole one (status 0 with one value of at most 1 MiB, or status 1 with
//      a message), a round only for a valid hello, and the server must close the connection
//      once the fuzzer's side is shut.
// Nothing may crash or hang: a connection neither answered nor closed within 8 s is a bug (the
// server gives a stranger 5 s).
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
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "base/digest.h"
#include "comm/bootstrap/bootstrap.h"
#include "tests/fuzz/fuzz_socket.h"

namespace {

using ddl::fuzz::connect_loopback;
using ddl::fuzz::readable;
using ddl::fuzz::send_pieces;

constexpr const char* kToken = "fuzz-token";
constexpr std::string_view kMagic = "DDLRV2";
constexpr size_t kNonceSize = 16;
constexpr uint32_t kMaxValue = 1u << 20;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_rendezvous_server: %s\n", what);
  std::abort();
}

int server_port() {
  static ddl::comm::RendezvousServer server(kToken, 1, 0, {}, [](const std::string&) {});
  return server.port();
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint32_t get_u32(std::string_view p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

/// Everything the server sends until it closes; fails past kWaitMs of silence.
std::string read_to_close(int fd) {
  std::string got;
  for (;;) {
    if (!readable(fd)) fail("the server neither answered nor closed in time");
    char buf[65536];
    const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return got;
    got.append(buf, static_cast<size_t>(k));
  }
}

/// The server's challenge: its nonce.
std::string read_challenge(int fd) {
  std::string got;
  while (got.size() < kMagic.size() + kNonceSize) {
    if (!readable(fd)) fail("no challenge in time");
    char buf[64];
    const ssize_t k = ::recv(fd, buf, kMagic.size() + kNonceSize - got.size(), 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail("the server closed before its challenge");
    got.append(buf, static_cast<size_t>(k));
  }
  if (!got.starts_with(kMagic)) fail("the challenge does not start with the magic");
  return got.substr(kMagic.size());
}

/// Checks the answers in `got`: whole ones, rounds (status 0) only when `may_round`.
void check_answers(std::string_view got, bool may_round) {
  while (!got.empty()) {
    if (got.size() < 8) fail("half an answer");
    const uint32_t status = get_u32(got), n = get_u32(got.substr(4));
    got.remove_prefix(8);
    if (status == 1) {
      if (n > got.size()) fail("a failed round's message is cut");
      got.remove_prefix(n);
      continue;
    }
    if (status != 0 || !may_round) fail("a round answered to a connection not admitted");
    if (n != 1 || got.size() < 4) fail("a round without exactly one value");
    const uint32_t len = get_u32(got);
    if (len > kMaxValue || len > got.size() - 4) fail("a value cut or over 1 MiB");
    got.remove_prefix(4 + len);
  }
}

void speak(std::string_view input, bool knows_token) {
  const int fd = connect_loopback(server_port(), "the server");
  const std::string nonce = read_challenge(fd);
  bool valid = false;
  std::string sent(input);
  if (knows_token && input.size() >= 2) {
    const uint32_t rank = static_cast<uint8_t>(input[0]) % 3;
    const uint32_t size = static_cast<uint8_t>(input[1]) % 3;
    std::string message = "libddl rendezvous rank: " + nonce;
    put_u32(message, rank);
    put_u32(message, size);
    sent = std::string(kMagic);
    put_u32(sent, rank);
    put_u32(sent, size);
    sent += ddl::base::bytes(ddl::base::hmac_sha256(kToken, message));
    sent += input.substr(2);
    valid = rank == 0 && size == 1;
  }
  send_pieces(fd, sent);
  ::shutdown(fd, SHUT_WR);
  check_answers(read_to_close(fd), valid);
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  speak(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), data[0] % 2 == 1);
  return 0;
}
