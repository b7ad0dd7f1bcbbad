// The TCP transport: a listening device and one socket per pair of ranks.
//
// How it works: the device binds a listening socket to DeviceOptions::bind_address (or to any
// address) on an ephemeral port and publishes "ip:port", the ip being the bind address or the
// first address of an interface that is up and not loopback (127.0.0.1 when there is none),
// so that peers in other network namespaces can reach it. IPv6 addresses are written "[ip]".
//
// For each pair the lower rank initiates: it connects (retrying until the deadline while the
// peer refuses) and answers the acceptor's challenge with a proof of the job token (hello.cc).
// The higher rank's device runs one acceptor thread from its creation: it accepts every
// connection, sends the challenge, checks the answer (5 s at most per connection, many at
// once), refuses the connections that fail it (one byte, 'N', then closed) and files the
// others by the initiator's rank. When accept() finds no descriptor free (a flood of
// connections, a low ulimit -n) the connection stays queued; the acceptor leaves the listening
// socket alone for a moment (base::AcceptRest) rather than spin on it, and takes the
// connection once a descriptor frees.
// connect() on the higher rank waits on that file for its peer, so connections that arrive
// for another peer, or before anyone asks, wait for their own connect() call; connect() may be
// called from several threads.
// try_connect() is connect() that never waits on the peer's program: the initiator (whose
// peer's acceptor thread answers by itself) takes a refused connection as the peer's end
// rather than trying again; the higher rank takes the link from the file when it is there,
// and returns nothing otherwise.
//
// Strangers cannot use up the acceptor's descriptors: the listener's guard
// (base/net/listener.h) lets at most kMaxPending connections wait for their hello at once and
// closes the oldest of them to make room only once it has had its grace, so a flood of silent
// connections costs the rank kMaxPending descriptors and a real peer keeps its place. An initiator
// whose connection is closed after the challenge and before the answer (crowded out by a flood, or
// the acceptor out of descriptors) connects again, waiting longer each time (kRetryFirst, doubling
// up to kRetryMost), until its deadline; only an 'N' is a refusal, reported at once.
//
// With DeviceOptions::streams = n > 1 the initiator opens n connections to the peer, each
// hello saying which of how many it is; the acceptor hands a link over once all n have
// arrived, and the link stripes its bytes across them (link.cc). The initiator's count wins.

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/fd.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "comm/core/quiet_thread.h"
#include "comm/transport/link.h"
#include "comm/transport/os.h"
#include "comm/transport/tcp/hello.h"
#include "comm/transport/tcp/link.h"

namespace ddl::comm::transport {

namespace {

using Clock = std::chrono::steady_clock;
using tcp::kSocketBuffer;

/// How long the acceptor gives a new connection to present its hello.
constexpr auto kHelloTime = std::chrono::seconds(5);
/// The most sockets one link may have.
constexpr int kMaxStreams = 64;
/// The most connections that wait for their hello at once (strangers' included).
constexpr size_t kMaxPending = 64;
/// The initiator's first wait before it connects again after its connection was closed
/// unanswered; each such close doubles it, up to kRetryMost.
constexpr auto kRetryFirst = std::chrono::milliseconds(50);
constexpr auto kRetryMost = std::chrono::milliseconds(1000);

using base::errno_text;

/// Milliseconds left until `deadline`, for poll(): at least 0, at most 1000.
int wait_ms(Clock::time_point deadline) {
  return base::Deadline(deadline).poll_ms();
}

/// The first IPv4 address of an interface that is up and not loopback; "127.0.0.1" when none.
std::string default_address() {
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  freeifaddrs(list);
  return found;
}

void set_buffers(int fd) {
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof kSocketBuffer);
}

/// The host and port of `address` ("ip:port") of the peer `name`; throws TransportError when
/// it has no port.
std::pair<std::string, std::string> endpoint_of(const std::string& name,
                                                const std::string& address) {
  auto split = base::net::split_host_port(address);
  if (!split || split->second.empty()) {
    throw TransportError(name + ": cannot resolve its address '" + address + "': no port");
  }
  return *split;
}

class TcpDevice : public Device {
 public:
  explicit TcpDevice(const DeviceOptions& o);
  ~TcpDevice() override;
  TcpDevice(const TcpDevice&) = delete;
  TcpDevice& operator=(const TcpDevice&) = delete;

  std::string address() const override { return address_; }
  std::unique_ptr<Link> connect(int peer, const std::string& peer_name,
                                const std::string& peer_address,
                                std::chrono::milliseconds timeout) override {
    return link(peer, peer_name, peer_address, timeout, true);
  }
  std::unique_ptr<Link> try_connect(int peer, const std::string& peer_name,
                                    const std::string& peer_address,
                                    std::chrono::milliseconds timeout) override {
    return link(peer, peer_name, peer_address, timeout, false);
  }

 private:
  /// connect() (`wait`: for the peer's connection too, and a refused one is tried again) and
  /// try_connect().
  std::unique_ptr<Link> link(int peer, const std::string& peer_name,
                             const std::string& peer_address, std::chrono::milliseconds timeout,
                             bool wait);
  /// A connection the acceptor has challenged and waits to hear from.
  struct Incoming {
    int fd;
    uint64_t id;  ///< its name for the guard
    tcp::Nonce nonce;
    std::string in;
  };

  void accept_loop();
  /// Accepts what waits, while the guard has room and there is a descriptor.
  void accept_new(std::vector<Incoming>& incoming, base::net::ListenerGuard& guard,
                  base::AcceptRest& rest);
  /// Reads the hellos of `incoming` that poll() found ready (`ready`, in order) and closes
  /// those the guard gives up on; keeps the others, oldest first.
  void read_hellos(std::vector<Incoming>& incoming, base::net::ListenerGuard& guard,
                   const pollfd* ready);
  /// Reads more of `c`'s hello; true when `c` is done with (filed or closed).
  bool read_hello(Incoming& c);
  /// The connections of a link to `peer`, as the initiator; a refused connection is tried
  /// again until the timeout, or (`refused_ends`) fails at once.
  std::vector<int> initiate(int peer, const std::string& name, const std::string& address,
                            std::chrono::milliseconds timeout, bool refused_ends);
  /// Connection `stream` of a link to `peer`, as the initiator.
  int initiate_one(int peer, const std::string& name, const std::string& address,
                   std::chrono::milliseconds timeout, Clock::time_point deadline, int stream,
                   bool refused_ends);
  /// The link from `peer` that the acceptor has filed whole, taken from the file; nullptr
  /// when it has not. Called with mutex_ held.
  std::unique_ptr<Link> claim(int peer, const std::string& peer_name);
  /// The handshake on connected `fd`: true when the acceptor took it, false when it closed the
  /// connection after its challenge without an answer (crowded out: worth another try).
  bool handshake(int fd, int peer, const std::string& name, const std::string& address,
                 Clock::time_point deadline, int stream);

  /// The checked connections from one initiator, by stream index.
  struct Arrived {
    int streams = 1;
    std::map<int, int> fds;
    bool complete() const { return static_cast<int>(fds.size()) == streams; }
  };

  int rank_;
  std::string token_;
  int streams_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  ///< eventfd that stops the acceptor
  std::string address_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<int, Arrived> accepted_;  ///< by initiator rank, not yet claimed
  uint64_t accepted_count_ = 0;      ///< connections the acceptor took: the next one's id
  std::thread acceptor_;
};

TcpDevice::TcpDevice(const DeviceOptions& o)
    : rank_(o.rank), token_(o.token), streams_(std::clamp(o.streams, 1, kMaxStreams)) {
  const std::string who = "rank " + std::to_string(rank_);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  const char* node = o.bind_address.empty() ? nullptr : o.bind_address.c_str();
  hints.ai_family = node == nullptr ? AF_INET : AF_UNSPEC;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(node, "0", &hints, &list);
  if (rc != 0) {
    throw TransportError(who + ": cannot listen on '" + o.bind_address + "': " + gai_strerror(rc));
  }
  int err = 0;
  for (addrinfo* a = list; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    set_buffers(fd);  // inherited by accepted sockets, before the window is agreed
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      listen_fd_ = fd;
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      char host[NI_MAXHOST], port[NI_MAXSERV];
      getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
      std::string h = node == nullptr ? default_address() : host;
      if (h.find(':') != std::string::npos) h = "[" + h + "]";
      address_ = h + ":" + port;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  freeaddrinfo(list);
  if (listen_fd_ < 0) {
    throw TransportError(who + ": cannot listen on '" + o.bind_address + "': " + errno_text(err) +
                         " (is it an address of this host?)");
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw TransportError(who + ": eventfd: " + errno_text(e));
  }
  acceptor_ = quiet_thread([this] { accept_loop(); });
}

TcpDevice::~TcpDevice() {
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) {
    // The eventfd cannot be full; the acceptor also stops at its next wake-up.
  }
  acceptor_.join();
  ::close(wake_fd_);
  ::close(listen_fd_);
  for (auto& [rank, arrived] : accepted_) {
    for (auto& [stream, fd] : arrived.fds)
      ::close(fd);
  }
}

void TcpDevice::accept_loop() {
  std::vector<Incoming> incoming;  // oldest first
  std::vector<pollfd> fds;
  base::AcceptRest rest;  // no descriptor left: the listening socket rests
  base::net::ListenerGuard guard({.max_waiting = kMaxPending, .hello_time = kHelloTime});
  for (;;) {
    const auto listen_at = std::max(rest.until(), guard.room_at());
    const bool listening = Clock::now() >= listen_at;
    fds.assign({pollfd{wake_fd_, POLLIN, 0},
                pollfd{listen_fd_, static_cast<short>(listening ? POLLIN : 0), 0}});
    Clock::time_point next = std::min(Clock::now() + std::chrono::seconds(1), guard.next_due());
    if (!listening) next = std::min(next, listen_at);
    for (const Incoming& c : incoming)
      fds.push_back(pollfd{c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), wait_ms(next)) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) break;
    // Hellos first (fds[2..] match `incoming` as it was), then new connections.
    read_hellos(incoming, guard, fds.data() + 2);
    if ((fds[1].revents & POLLIN) != 0) accept_new(incoming, guard, rest);
  }
  for (const Incoming& c : incoming)
    ::close(c.fd);
}

void TcpDevice::read_hellos(std::vector<Incoming>& incoming, base::net::ListenerGuard& guard,
                            const pollfd* ready) {
  const std::vector<uint64_t> late = guard.overdue();
  std::vector<Incoming> still;
  for (size_t i = 0; i < incoming.size(); ++i) {
    Incoming& c = incoming[i];
    if (ready[i].revents != 0 && read_hello(c)) {
      guard.settled(c.id);
      continue;
    }
    if (std::find(late.begin(), late.end(), c.id) != late.end()) {
      ::close(c.fd);
      continue;
    }
    still.push_back(std::move(c));
  }
  incoming = std::move(still);
}

void TcpDevice::accept_new(std::vector<Incoming>& incoming, base::net::ListenerGuard& guard,
                           base::AcceptRest& rest) {
  for (;;) {
    if (Clock::now() < guard.room_at()) return;  // the queue waits
    // EAGAIN, or an error of one connection: the next poll() tells. Out of descriptors the
    // connection stays queued and `rest` rests the listening socket.
    const int fd = rest.accept(listen_fd_, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Incoming c{fd, ++accepted_count_, {}, ""};
    try {
      c.nonce = base::net::nonce();
    } catch (const std::exception&) {
      ::close(fd);  // no randomness, no challenge: the initiator sees no ddl transport
      continue;
    }
    const std::string challenge = tcp::encode(tcp::Challenge{rank_, c.nonce});
    // A fresh socket has room for a few bytes: a short send means a broken connection.
    if (::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(challenge.size())) {
      ::close(fd);
      continue;
    }
    incoming.push_back(std::move(c));
    for (const uint64_t old : guard.arrive(incoming.back().id)) {  // unproven after its grace
      const auto it = std::find_if(incoming.begin(), incoming.end(),
                                   [old](const Incoming& i) { return i.id == old; });
      ::close(it->fd);
      incoming.erase(it);
    }
  }
}

bool TcpDevice::read_hello(Incoming& c) {
  char buf[tcp::kHelloSize];
  const ssize_t k = ::recv(c.fd, buf, tcp::kHelloSize - c.in.size(), MSG_DONTWAIT);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (k <= 0) {
    ::close(c.fd);
    return true;
  }
  c.in.append(buf, static_cast<size_t>(k));
  if (c.in.size() < tcp::kHelloSize) return false;
  const auto hello = tcp::decode_hello(c.in);
  // Only lower ranks initiate; the proof binds the token to this nonce and both ranks.
  const bool good =
      hello && hello->initiator >= 0 && hello->initiator < rank_ && hello->streams >= 1 &&
      hello->streams <= kMaxStreams && hello->stream < hello->streams &&
      base::same_secret(hello->proof, tcp::hello_proof(token_, c.nonce, hello->initiator, rank_,
                                                       hello->stream, hello->streams));
  if (!good) {  // refused, and told so: the initiator does not try again
    if (::send(c.fd, &tcp::kRefused, 1, MSG_NOSIGNAL) != 1) {
      // Gone already: it learns nothing it needs.
    }
    ::close(c.fd);
    return true;
  }
  if (::send(c.fd, &tcp::kAccepted, 1, MSG_NOSIGNAL) != 1) {
    ::close(c.fd);
    return true;
  }
  tcp::tune_socket(c.fd);
  {
    std::lock_guard lock(mutex_);
    Arrived& a = accepted_[hello->initiator];
    if (a.streams != hello->streams) {  // a new set of connections replaces an old one
      for (auto& [stream, fd] : a.fds)
        ::close(fd);
      a = Arrived{hello->streams, {}};
    }
    auto [it, fresh] = a.fds.try_emplace(hello->stream, c.fd);
    if (!fresh) {  // the peer connected again (a retry): the newest connection wins
      ::close(it->second);
      it->second = c.fd;
    }
  }
  arrived_.notify_all();
  return true;
}

std::unique_ptr<Link> TcpDevice::link(int peer, const std::string& peer_name,
                                      const std::string& peer_address,
                                      std::chrono::milliseconds timeout, bool wait) {
  if (peer == rank_) throw TransportError(peer_name + ": a rank cannot connect to itself");
  if (peer > rank_) {
    return std::make_unique<tcp::TcpLink>(initiate(peer, peer_name, peer_address, timeout, !wait),
                                          peer, peer_name);
  }
  std::unique_lock lock(mutex_);
  const auto ready = [&] {
    auto it = accepted_.find(peer);
    return it != accepted_.end() && it->second.complete();
  };
  if (wait && !arrived_.wait_for(lock, timeout, ready)) {
    throw TransportError(peer_name + ": no connection from the peer within " +
                         seconds_text(timeout) + " (is it running, with this job's token?)");
  }
  return claim(peer, peer_name);
}

std::unique_ptr<Link> TcpDevice::claim(int peer, const std::string& peer_name) {
  auto it = accepted_.find(peer);
  if (it == accepted_.end() || !it->second.complete()) return nullptr;
  std::vector<int> fds;
  for (auto& [stream, fd] : it->second.fds)
    fds.push_back(fd);
  accepted_.erase(it);
  return std::make_unique<tcp::TcpLink>(std::move(fds), peer, peer_name);
}

std::vector<int> TcpDevice::initiate(int peer, const std::string& name, const std::string& address,
                                     std::chrono::milliseconds timeout, bool refused_ends) {
  const auto deadline = Clock::now() + timeout;
  std::vector<int> fds;
  try {
    for (int s = 0; s < streams_; ++s)
      fds.push_back(initiate_one(peer, name, address, timeout, deadline, s, refused_ends));
  } catch (...) {
    for (int fd : fds)
      ::close(fd);
    throw;
  }
  return fds;
}

int TcpDevice::initiate_one(int peer, const std::string& name, const std::string& address,
                            std::chrono::milliseconds timeout, Clock::time_point deadline,
                            int stream, bool refused_ends) {
  const auto [host, port] = endpoint_of(name, address);
  std::string last = "timed out";
  int unanswered = 0;  // connections closed after the challenge without an answer
  for (;;) {
    const base::net::Dialed d = base::net::dial(host, port, deadline, set_buffers);
    if (d.gai != 0) {
      throw TransportError(name + ": cannot resolve its address '" + address +
                           "': " + gai_strerror(d.gai));
    }
    bool answered = false;
    try {
      answered = d.fd >= 0 && handshake(d.fd, peer, name, address, deadline, stream);
    } catch (...) {
      ::close(d.fd);
      throw;
    }
    if (answered) {
      tcp::tune_socket(d.fd);
      return d.fd;
    }
    if (d.fd >= 0) ::close(d.fd);
    if (d.err == ECONNREFUSED && refused_ends) {
      throw TransportError(name + ": its listener refuses connections: the rank has ended");
    }
    if (d.fd < 0) {
      last = errno_text(d.err);
    } else {
      ++unanswered;
      last = "it closed the connection before answering this rank's hello, " +
             std::to_string(unanswered) + (unanswered == 1 ? " time" : " times") +
             " (is a flood of connections reaching it? see libddl(3), TRANSPORTS)";
    }
    // Refused (the peer is not listening yet): every 50 ms. Crowded out: longer each time.
    const Clock::duration pause =
        unanswered == 0 ? std::chrono::milliseconds(50)
                        : std::min<Clock::duration>(
                              kRetryFirst * (1 << std::min(unanswered - 1, 10)), kRetryMost);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    if (Clock::now() >= deadline) {
      throw TransportError(name + ": cannot connect to " + address + " within " +
                           seconds_text(timeout) + ": " + last);
    }
  }
}

bool TcpDevice::handshake(int fd, int peer, const std::string& name, const std::string& address,
                          Clock::time_point deadline, int stream) {
  // Reads exactly `n` bytes; std::nullopt on end of file or a reset.
  auto read_exact = [&](size_t n) {
    std::string in(n, '\0');
    if (base::net::read_upto(fd, in.data(), n, deadline) == n) return std::optional(in);
    if (Clock::now() >= deadline) {
      throw TransportError(name + ": no answer from " + address + " during the handshake");
    }
    return std::optional<std::string>();
  };
  const auto bytes = read_exact(tcp::kChallengeSize);
  const auto challenge = bytes ? tcp::decode_challenge(*bytes) : std::nullopt;
  if (!challenge) {
    throw TransportError(name + ": " + address + " is not a ddl TCP transport");
  }
  if (challenge->acceptor != peer) {
    throw TransportError(name + ": " + address + " is the address of rank " +
                         std::to_string(challenge->acceptor));
  }
  const std::string hello = tcp::encode(
      tcp::Hello{rank_, stream, streams_,
                 tcp::hello_proof(token_, challenge->nonce, rank_, peer, stream, streams_)});
  // A broken send, an end or a reset before the answer: the acceptor closed the connection
  // unanswered (crowded out), not a refusal.
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size()))
    return false;
  const auto answer = read_exact(1);
  if (!answer) return false;
  if ((*answer)[0] != tcp::kAccepted) {
    throw TransportError(name +
                         ": the peer refused this rank's hello (is the job token the same?)");
  }
  return true;
}

}  // namespace

std::unique_ptr<Device> make_tcp_device(const DeviceOptions& options) {
  return std::make_unique<TcpDevice>(options);
}

}  // namespace ddl::comm::transport
