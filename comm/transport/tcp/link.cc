// A TCP link: one socket, used without blocking.
//
// How it works: send_some() and recv_some() are one send()/recv() each with MSG_DONTWAIT;
// EAGAIN means "nothing now" (0) and exchange() then polls the socket. MSG_NOSIGNAL keeps a
// closed peer from raising SIGPIPE. End of file, a reset or any other error is final: it
// becomes a TransportError naming the peer, and the socket is not used again. A link is one
// stream: DeviceOptions::streams is not striped across sockets (see tcp.cc).

#include "comm/transport/tcp/link.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ddl::comm::transport::tcp {

void tune_socket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof kSocketBuffer);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

TcpLink::TcpLink(int fd, int peer, std::string peer_name)
    : fd_(fd), peer_(peer), peer_name_(std::move(peer_name)) {}

TcpLink::~TcpLink() {
  ::close(fd_);
}

void TcpLink::fail(const char* call, int error) const {
  switch (error) {
    case 0:
    case EPIPE:
      throw TransportError(peer_name_ + ": the connection was closed by the peer");
    case ECONNRESET:
      throw TransportError(peer_name_ + ": the connection was reset by the peer");
    default:
      throw TransportError(peer_name_ + ": " + call + ": " + std::strerror(error));
  }
}

size_t TcpLink::send_some(const void* data, size_t n) {
  if (n == 0) return 0;
  for (;;) {
    const ssize_t k = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k >= 0) return static_cast<size_t>(k);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail("send", errno);
  }
}

size_t TcpLink::recv_some(void* data, size_t n) {
  if (n == 0) return 0;
  for (;;) {
    const ssize_t k = ::recv(fd_, data, n, MSG_DONTWAIT);
    if (k > 0) return static_cast<size_t>(k);
    if (k == 0) fail("recv", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail("recv", errno);
  }
}

}  // namespace ddl::comm::transport::tcp
