#pragma once

#include <string>

#include "comm/transport/link.h"

namespace ddl::comm::transport::tcp {

/// One connected, non-blocking socket to a peer (see link.cc).
class TcpLink : public Link {
 public:
  /// Takes ownership of `fd`, which has passed the handshake.
  TcpLink(int fd, int peer, std::string peer_name);
  ~TcpLink() override;
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;

  int peer() const override { return peer_; }
  std::string peer_name() const override { return peer_name_; }
  size_t send_some(const void* data, size_t n) override;
  size_t recv_some(void* data, size_t n) override;
  int poll_fd() const override { return fd_; }

 private:
  [[noreturn]] void fail(const char* call, int error) const;

  int fd_;
  int peer_;
  std::string peer_name_;
};

/// The options every link's socket gets: non-blocking, TCP_NODELAY, kSocketBuffer buffers.
void tune_socket(int fd);
/// SO_SNDBUF and SO_RCVBUF asked for (the kernel may cap them at net.core.[rw]mem_max).
constexpr int kSocketBuffer = 4 << 20;

}  // namespace ddl::comm::transport::tcp
