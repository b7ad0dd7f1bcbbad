// A TCP link: one or more sockets, used without blocking.
//
// How it works: the link's byte stream is cut into stripes of kStripe bytes, dealt to its
// sockets in turn (stripe i on socket i % n), so that a large send runs over n connections
// while both sides know, from their byte counts alone, which socket comes next. send_some()
// and recv_some() go stripe by stripe (stripes()) with send()/recv() and MSG_DONTWAIT until a
// socket takes or gives less than asked; EAGAIN means "nothing now" and exchange() then polls the
// socket of the current stripe (send_poll_fd(), recv_poll_fd()). With one socket this is plain TCP.
// MSG_NOSIGNAL keeps a closed peer from raising SIGPIPE. End of file, a reset or any other
// error is final: it becomes a TransportError naming the peer.

#include "comm/transport/tcp/link.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

namespace ddl::comm::transport::tcp {

void tune_socket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof kSocketBuffer);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

TcpLink::TcpLink(std::vector<int> fds, int peer, std::string peer_name)
    : PeerLink(peer, std::move(peer_name)), fds_(std::move(fds)) {}

TcpLink::~TcpLink() {
  for (int fd : fds_)
    ::close(fd);
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

size_t TcpLink::stripes(size_t n, uint64_t& counter, const char* call,
                        const std::function<ssize_t(int fd, size_t done, size_t want)>& io) {
  size_t done = 0;
  while (done < n) {
    const size_t want =
        fds_.size() == 1 ? n - done : std::min<uint64_t>(n - done, kStripe - counter % kStripe);
    const ssize_t k = io(fds_[stream_of(counter)], done, want);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(call, errno);
    }
    done += static_cast<size_t>(k);
    counter += static_cast<uint64_t>(k);
    if (static_cast<size_t>(k) < want) break;
  }
  return done;
}

size_t TcpLink::send_some(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  return stripes(n, sent_, "send", [p](int fd, size_t done, size_t want) {
    return ::send(fd, p + done, want, MSG_NOSIGNAL | MSG_DONTWAIT);
  });
}

size_t TcpLink::recv_some(void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  return stripes(n, received_, "recv", [this, p](int fd, size_t done, size_t want) {
    const ssize_t k = ::recv(fd, p + done, want, MSG_DONTWAIT);
    if (k == 0) fail("recv", 0);
    return k;
  });
}

}  // namespace ddl::comm::transport::tcp
