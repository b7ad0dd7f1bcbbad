// What the fuzz targets that talk to a real server over loopback TCP (fuzz_tcp_hello,
// fuzz_rendezvous_server) share: waiting, connecting and sending in the face of libFuzzer's
// timeout alarm (SIGALRM), which interrupts poll(), connect() and send().
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

namespace ddl::fuzz {

/// How long a server has to answer, connect or close.
inline constexpr int kWaitMs = 8000;

/// Waits for `fd` to be readable; false after kWaitMs. An interrupted poll() waits again for
/// the time left.
inline bool readable(int fd) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

/// A connection to `port` on loopback, tried again for kWaitMs: connect() may be interrupted,
/// or find no local port free while earlier connections linger in TIME_WAIT. Aborts naming
/// `peer` ("the acceptor", "the server") when it cannot connect.
inline int connect_loopback(int port, const char* peer) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    const int e = errno;
    if (fd >= 0) ::close(fd);
    static bool told = false;
    if (!std::exchange(told, true))
      std::fprintf(stderr, "fuzz: connect: %s; trying again\n", std::strerror(e));
    if (std::chrono::steady_clock::now() >= until) {
      std::fprintf(stderr, "fuzz: cannot connect to %s: %s\n", peer, std::strerror(e));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Sends `bytes` in pieces of varying sizes (1, 6, 32, ...: the peer's reader must join them),
/// until they are sent or the peer closed.
inline void send_pieces(int fd, std::string_view bytes) {
  size_t step = 1;
  while (!bytes.empty()) {
    const size_t n = std::min(step, bytes.size());
    const ssize_t k = ::send(fd, bytes.data(), n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;  // closed by the peer
    bytes.remove_prefix(static_cast<size_t>(k));
    step = step * 5 % 61 + 1;
  }
}

}  // namespace ddl::fuzz
