// libFuzzer target for the --probe-links agent's wire formats, both sides of its
// authentication. The first byte picks the side (its value modulo 4):
//   0  ddlrun's channel to the agent (parse_agent_request): any line reads as a request or
//      as unknown, never more;
//   1  a connection to the agent's port (serve_link_test over a socket pair), before
//      authentication: the answer to the challenge from a stranger;
//   2  the same after authentication: the right proof for the challenge's nonce first, then
//      the input as the pings and the bulk transfer of an agent that knows the token;
//   3  the sending agent's side: the input as the challenge line it reads
//      (parse_link_challenge): a nonce only of the exact form, never more.
// In 1 and 2 the input then ends (the peer shuts its side), so each run is quick: the agent
// must return, never hang or crash, whatever came.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "mapper/link_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int side = data[0] % 4;
  if (side == 3) {
    const std::optional<std::string> nonce = ddl::mapper::parse_link_challenge(input);
    if (nonce && (nonce->size() != 32 || !input.ends_with(*nonce))) {
      std::fprintf(stderr, "fuzz_link_agent: a nonce not taken from the challenge\n");
      std::abort();
    }
    return 0;
  }
  if (side == 0) {
    const ddl::mapper::AgentRequest r = ddl::mapper::parse_agent_request(input);
    if (r.kind == ddl::mapper::AgentRequest::Kind::kTest && (r.address.empty() || r.port.empty())) {
      std::fprintf(stderr, "fuzz_link_agent: a test without an address or port\n");
      std::abort();
    }
    return 0;
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  const int big = 1 << 20;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  const std::string nonce(32, '7');
  const std::string sent =
      side == 2 ? ddl::mapper::link_proof("t0k3n", nonce) + "\n" + input : input;
  (void)!::write(fds[0], sent.data(), sent.size());
  ::shutdown(fds[0], SHUT_WR);
  ddl::mapper::serve_link_test(fds[1], "t0k3n", -1, nonce);
  ::close(fds[0]);
  ::close(fds[1]);
  return 0;
}
