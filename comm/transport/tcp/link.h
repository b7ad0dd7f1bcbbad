#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/transport/link.h"

namespace ddl::comm::transport::tcp {

/// A peer's byte stream over one or more connected, non-blocking sockets (see link.cc).
class TcpLink : public PeerLink {
 public:
  /// Takes ownership of `fds`, which have passed the handshake, in stream order.
  TcpLink(std::vector<int> fds, int peer, std::string peer_name);
  ~TcpLink() override;

  size_t send_some(const void* data, size_t n) override;
  size_t recv_some(void* data, size_t n) override;
  /// The only socket; -1 when there are several (see send_poll_fd(), recv_poll_fd()).
  int poll_fd() const override { return fds_.size() == 1 ? fds_[0] : -1; }
  int send_poll_fd() const override { return fds_[stream_of(sent_)]; }
  int recv_poll_fd() const override { return fds_[stream_of(received_)]; }

 private:
  /// The socket that carries the byte at `offset` of the stream.
  size_t stream_of(uint64_t offset) const { return (offset / kStripe) % fds_.size(); }
  [[noreturn]] void fail(const char* call, int error) const;
  /// Moves up to `n` bytes stripe by stripe with `io` (send or recv of `want` bytes from
  /// offset `done` of the caller's buffer, on socket `fd`), advancing `counter` (sent_ or
  /// received_), until a socket would block or moves less than asked. Returns the bytes moved;
  /// other errors end in fail().
  size_t stripes(size_t n, uint64_t& counter, const char* call,
                 const std::function<ssize_t(int fd, size_t done, size_t want)>& io);

  /// Bytes sent on one socket before the next takes over.
  static constexpr uint64_t kStripe = 256 * 1024;

  std::vector<int> fds_;
  uint64_t sent_ = 0;      ///< bytes sent so far
  uint64_t received_ = 0;  ///< bytes received so far
};

/// The options every link's socket gets: non-blocking, TCP_NODELAY, kSocketBuffer buffers.
void tune_socket(int fd);
/// SO_SNDBUF and SO_RCVBUF asked for (the kernel may cap them at net.core.[rw]mem_max).
constexpr int kSocketBuffer = 4 << 20;

}  // namespace ddl::comm::transport::tcp
