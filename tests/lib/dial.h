#pragma once
// dial(): a test's TCP connection to a port on loopback, as a stranger or a peer would make
// it; read_within(): what comes on it within a time. Header-only, for the tests of the rendezvous
// and link-agent wire formats (bench/ wire_attack.cc keeps its own copy: it is built against older
// checkouts too).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

namespace ddl::testing {

/// A blocking TCP connection to 127.0.0.1:`port`; a test failure and -1 when it cannot connect.
inline int dial(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

/// Exactly `n` bytes from `fd` within `limit`; what came before the end, an error or the limit.
inline std::string read_within(int fd, size_t n, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::string got;
  while (got.size() < n && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char buf[4096];
    const ssize_t k = ::recv(fd, buf, std::min(sizeof buf, n - got.size()), 0);
    if (k <= 0) break;
    got.append(buf, static_cast<size_t>(k));
  }
  return got;
}

}  // namespace ddl::testing
