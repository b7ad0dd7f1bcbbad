#pragma once
// A test's TCP recorder: a proxy on a loopback port that forwards every connection to a
// target port and keeps every byte that crossed it, both ways, as an eavesdropper on the link
// would see them. Header-only, for the tests of the rendezvous protocols.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ddl::testing {

class TcpRecorder {
 public:
  explicit TcpRecorder(int target_port) : target_(target_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_, 64);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpRecorder() {
    stop_ = true;
    thread_.join();
    for (auto [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    ::close(listen_);
  }
  TcpRecorder(const TcpRecorder&) = delete;
  TcpRecorder& operator=(const TcpRecorder&) = delete;

  int port() const { return port_; }
  /// Every byte forwarded so far, both directions.
  std::string bytes() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  int dial() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Forwards what `from` has to `to`; false when `from` ended (both sides are then shut).
  bool forward(int from, int to) {
    char buf[65536];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) {
      ::shutdown(to, SHUT_WR);
      return false;
    }
    {
      std::lock_guard lock(mutex_);
      seen_.append(buf, static_cast<size_t>(n));
    }
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t k = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (k <= 0) return false;
      sent += k;
    }
    return true;
  }

  void run() {
    std::vector<bool> open;  // by direction: 2i client to target, 2i+1 back
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_, POLLIN, 0}};
      for (size_t i = 0; i < pairs_.size(); ++i) {
        fds.push_back({open[2 * i] ? pairs_[i].first : -1, POLLIN, 0});
        fds.push_back({open[2 * i + 1] ? pairs_[i].second : -1, POLLIN, 0});
      }
      ::poll(fds.data(), fds.size(), 50);
      for (size_t i = 0; 2 * i + 2 < fds.size(); ++i) {
        if (fds[1 + 2 * i].revents && !forward(pairs_[i].first, pairs_[i].second))
          open[2 * i] = false;
        if (fds[2 + 2 * i].revents && !forward(pairs_[i].second, pairs_[i].first))
          open[2 * i + 1] = false;
      }
      if (fds[0].revents & POLLIN) {
        const int in = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
        const int out = in >= 0 ? dial() : -1;
        if (out >= 0) {
          pairs_.emplace_back(in, out);
          open.insert(open.end(), {true, true});
        } else if (in >= 0) {
          ::close(in);
        }
      }
    }
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::pair<int, int>> pairs_;
  mutable std::mutex mutex_;
  std::string seen_;
  std::thread thread_;
};

}  // namespace ddl::testing
