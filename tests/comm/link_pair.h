#pragma once

// Test links between threads of one process: every pair of ranks is joined by a
// socketpair(AF_UNIX, SOCK_STREAM), a real kernel byte stream driven without blocking, so the
// collectives run exactly as they would between processes.

#include <sys/socket.h>
#include <unistd.h>

#include <barrier>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/transport/link.h"

namespace ddl::comm::testing {

/// One end of a socketpair. Errors are TransportErrors naming the peer "rank N (thread)".
/// fail_after(bytes) makes this end close itself once it has sent that many bytes: the peer
/// then sees its link die mid-collective, as if the process had crashed.
class SocketLink : public transport::Link {
 public:
  SocketLink(int fd, int peer) : fd_(fd), peer_(peer) {}
  ~SocketLink() override { close(); }
  SocketLink(const SocketLink&) = delete;
  SocketLink& operator=(const SocketLink&) = delete;

  int peer() const override { return peer_; }
  std::string peer_name() const override { return "rank " + std::to_string(peer_) + " (thread)"; }

  size_t send_some(const void* data, size_t n) override {
    if (fd_ < 0) throw transport::TransportError(peer_name() + ": link closed here");
    if (sent_ >= fail_after_) {
      close();
      throw transport::TransportError(peer_name() + ": injected failure");
    }
    n = std::min(n, fail_after_ - sent_);
    const ssize_t k = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      throw transport::TransportError(peer_name() + ": send: " + std::strerror(errno));
    }
    sent_ += static_cast<size_t>(k);
    return static_cast<size_t>(k);
  }

  size_t recv_some(void* data, size_t n) override {
    if (fd_ < 0) throw transport::TransportError(peer_name() + ": link closed here");
    const ssize_t k = ::recv(fd_, data, n, MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      throw transport::TransportError(peer_name() + ": recv: " + std::strerror(errno));
    }
    if (k == 0 && n > 0) {
      throw transport::TransportError(peer_name() + ": the connection was closed by the peer");
    }
    return static_cast<size_t>(k);
  }

  int poll_fd() const override { return fd_; }

  void fail_after(size_t bytes) { fail_after_ = sent_ + bytes; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  int peer_;
  size_t sent_ = 0;
  size_t fail_after_ = static_cast<size_t>(-1);
};

/// Wraps a real link; once `bytes` have been sent through it, the next send throws as if the
/// rank had failed (the test then destroys the rank's links, as its process's exit would).
class FailAfter : public transport::Link {
 public:
  FailAfter(transport::Link& inner, size_t bytes) : inner_(inner), left_(bytes) {}
  int peer() const override { return inner_.peer(); }
  std::string peer_name() const override { return inner_.peer_name(); }
  size_t send_some(const void* data, size_t n) override {
    if (left_ == 0) throw transport::TransportError(peer_name() + ": injected failure");
    const size_t k = inner_.send_some(data, std::min(n, left_));
    left_ -= k;
    return k;
  }
  size_t recv_some(void* data, size_t n) override { return inner_.recv_some(data, n); }
  int poll_fd() const override { return inner_.poll_fd(); }

 private:
  transport::Link& inner_;
  size_t left_;
};

/// n ranks, every pair joined by a socketpair. link(a, b) is rank a's end towards rank b.
class Mesh {
 public:
  explicit Mesh(int n) : n_(n), links_(static_cast<size_t>(n) * n) {
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
          throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
        }
        links_[a * n + b] = std::make_unique<SocketLink>(fds[0], b);
        links_[b * n + a] = std::make_unique<SocketLink>(fds[1], a);
      }
    }
  }
  int size() const { return n_; }
  SocketLink& link(int from, int to) { return *links_[from * n_ + to]; }

  /// Rank `self`'s group over `members` (global ranks in ring order).
  Group group(int self, std::vector<int> members,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    int index = -1;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == self) index = static_cast<int>(i);
    }
    if (index < 0) throw std::logic_error("rank not in its group");
    return Group(
        std::move(members), index,
        [this, self](int peer) -> transport::Link& { return link(self, peer); }, timeout);
  }
  /// Rank `self`'s group over all ranks in rank order.
  Group world(int self, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::vector<int> all(n_);
    for (int i = 0; i < n_; ++i)
      all[i] = i;
    return group(self, std::move(all), timeout);
  }

 private:
  int n_;
  std::vector<std::unique_ptr<SocketLink>> links_;
};

/// Runs fn(rank) on n threads at once; returns what each threw (null when it returned).
inline std::vector<std::exception_ptr> run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return errors;
}

/// what() of an exception_ptr, "" when null.
inline std::string message(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace ddl::comm::testing
