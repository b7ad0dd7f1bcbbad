// The rendezvous served by ddlrun, and its client in every rank.
//
// How it works: a rank connects to ddlrun's server over TCP; the server speaks first, "DDLRV2"
// and a 16-byte nonce, and the rank answers "DDLRV2", its rank, the job size and
// HMAC-SHA256(token, label || nonce || rank || size): the token never crosses the network, and
// a recorded hello is useless against the next nonce. A connection that does not answer within
// 5 s, or proves another token, or gives a rank out of range or already taken, is closed. Each
// allgather is a round: the rank sends the round number, how long it is willing to wait and its
// value; once every rank has sent that round, the server answers each with all values (status 0).
// If the first rank to arrive has waited longer than it said it would, or a rank's connection
// closes, the server answers everyone waiting with status 1 and a message naming the ranks that are
// missing, so that no rank hangs and every rank can say who did not come. A rank that takes no
// byte of its answer for 5 s (stopped, hung) is cut off, so that it cannot hold the others up.
// Strangers cannot exhaust the server: before its hello is accepted a connection is read no
// further than the hello's 46 bytes (a wrong magic is refused at its first byte), and the
// listener's guard (base/net/listener.h) caps the connections that wait for
// their hello, keeps a rank's place for its grace and closes a connection silent for
// kHelloTime; out of descriptors, the listening socket rests instead of spinning
// (base::AcceptRest). Refusals are closed at once and reported (the guard bounds how many)
// quoting at most a short printable prefix of what was sent; a refused hello is told why as a
// failed round, sent without waiting.
//
// The client trusts the server no more than the server trusts it: its connect and hello end
// at its deadline (a host that drops packets, or a server that says nothing, is not waited
// out), each round's answer must come whole within the round's timeout and kAnswerSlack more
// however it trickles, a server that stops reading cannot hold it, a length over kMaxValue or
// a count other than the job's size is a protocol error naming the server's address, and a
// failed round's message is shown printable, at most kMaxErrorText bytes of it.
//
// The memory bootstrap (threads in one process) keeps the rounds in a shared table.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/digest.h"
#include "base/fd.h"
#include "base/net/codec.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/core/quiet_thread.h"
#include "comm/transport/os.h"

namespace ddl::comm {

namespace {

using transport::seconds_text;

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr std::string_view kMagic = "DDLRV2";
constexpr size_t kNonceSize = base::net::kNonceSize;
constexpr size_t kChallengeSize = 6 + kNonceSize;
constexpr size_t kHelloSize = 6 + 4 + 4 + 32;
constexpr uint32_t kMaxValue = 1u << 20;
constexpr auto kHelloTime = 5s;         // for a connection's hello
constexpr size_t kMaxErrorText = 4096;  // of a failed round's message, shown to the user
constexpr auto kAnswerSlack = std::chrono::milliseconds(10'000);    // past a round's own timeout
constexpr auto kChallengeTime = std::chrono::milliseconds(10'000);  // at least, once connected
constexpr auto kSendStall = 5s;  // a rank that takes no byte of its answer for this long is cut off

using base::net::get_u32;
using base::net::put_str;
using base::net::put_u32;

/// What a rank's proof of the job's token binds, for the server's `nonce`.
std::string rank_context(std::string_view nonce, uint32_t rank, uint32_t size) {
  std::string context(nonce);
  put_u32(context, rank);
  put_u32(context, size);
  return context;
}
constexpr std::string_view kRankLabel = "libddl rendezvous rank: ";

/// Writes all of `data` (`fd` non-blocking); false when the connection fails, when `stall`
/// passes without the peer taking a byte, or at `until` (a peer that stops reading, or reads
/// a byte now and then, cannot hold the writer up for ever).
bool write_all(int fd, std::string_view data,
               std::chrono::milliseconds stall = std::chrono::milliseconds::max(),
               Clock::time_point until = Clock::time_point::max()) {
  Clock::time_point last_taken = Clock::now();
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      const auto now = Clock::now();
      const auto left =
          std::min(stall - std::chrono::duration_cast<std::chrono::milliseconds>(now - last_taken),
                   std::chrono::ceil<std::chrono::milliseconds>(until - now));
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
    last_taken = Clock::now();
  }
  return true;
}

using base::net::read_upto;

/// Reads exactly n bytes before `deadline`; false on EOF, error or timeout.
bool read_exact(int fd, char* out, size_t n, Clock::time_point deadline) {
  return read_upto(fd, out, n, deadline) == n;
}

// ---------------------------------------------------------------------------------------------
// Client

/// Reads the server's challenge and answers it with this rank's proof before `deadline`
/// (`waited` from now): "" or why not, to follow "the rendezvous at ADDRESS ".
std::string answer_challenge(int fd, const std::string& token, int rank, int size,
                             Clock::time_point deadline, std::chrono::milliseconds waited) {
  char challenge[kChallengeSize];
  const size_t got = read_upto(fd, challenge, sizeof challenge, deadline);
  const std::string_view came(challenge, got);
  if (!base::net::may_speak(came, kMagic)) {
    return "does not speak " + std::string(kMagic) + " (it sent '" + base::excerpt(came) +
           "'; is something other than this job's ddlrun listening there?)";
  }
  if (got < sizeof challenge && Clock::now() >= deadline) {
    return "sent no whole challenge within " + seconds_text(waited) +
           " (is ddlrun stopped or overloaded? see its output)";
  }
  if (got < sizeof challenge) {
    return "closed the connection before its challenge (is it this version's ddlrun? see its "
           "output)";
  }
  const std::string_view nonce(challenge + kMagic.size(), kNonceSize);
  std::string hello(kMagic);
  put_u32(hello, static_cast<uint32_t>(rank));
  put_u32(hello, static_cast<uint32_t>(size));
  hello += base::net::proof(
      token, kRankLabel,
      rank_context(nonce, static_cast<uint32_t>(rank), static_cast<uint32_t>(size)));
  if (!write_all(fd, hello, std::chrono::milliseconds::max(), deadline)) {
    return "closed the connection or took none of this rank's hello (is ddlrun stopped or "
           "overloaded? see its output)";
  }
  return "";
}

class RendezvousClient : public Bootstrap {
 public:
  RendezvousClient(int fd, std::string address, int rank, int size)
      : fd_(fd), address_(std::move(address)), rank_(rank), size_(size) {}
  ~RendezvousClient() override { close(fd_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> allgather(const std::string& value,
                                     std::chrono::milliseconds timeout) override {
    // The server answers by itself when the wait is over; our own deadline is a backstop.
    const std::chrono::milliseconds waited = timeout + kAnswerSlack;
    const Clock::time_point deadline = Clock::now() + waited;
    std::string msg;
    put_u32(msg, round_++);
    put_u32(msg, static_cast<uint32_t>(timeout.count()));
    put_str(msg, value);
    if (!write_all(fd_, msg, std::chrono::milliseconds::max(), deadline))
      throw cut(waited, deadline);
    char head[8];
    if (!read_exact(fd_, head, 8, deadline)) throw cut(waited, deadline);
    const uint32_t status = get_u32({head, 8}, 0), n = get_u32({head, 8}, 4);
    if (status > 1) {
      throw garbled("'" + base::excerpt(std::string_view(head, 8)) + "'");
    }
    if (status == 1) {
      if (n > kMaxValue) throw garbled(too_long("an error message", n));
      std::string message(n, '\0');
      if (!read_exact(fd_, message.data(), n, deadline)) throw cut(waited, deadline);
      throw BootstrapError(base::excerpt(message, kMaxErrorText));
    }
    if (n != static_cast<uint32_t>(size_)) {
      throw garbled(std::to_string(n) + " values for a job of " + std::to_string(size_) + " ranks");
    }
    std::vector<std::string> values(size_);
    for (size_t r = 0; r < values.size(); ++r) {
      char len[4];
      if (!read_exact(fd_, len, 4, deadline)) throw cut(waited, deadline);
      const uint32_t l = get_u32({len, 4});
      if (l > kMaxValue) throw garbled(too_long("rank " + std::to_string(r) + "'s value", l));
      values[r].resize(l);
      if (!read_exact(fd_, values[r].data(), l, deadline)) throw cut(waited, deadline);
    }
    return values;
  }

 private:
  std::string who() const { return "rank " + std::to_string(rank_); }
  /// The answer did not come whole: the connection closed, or `waited` passed (at `deadline`).
  BootstrapError cut(std::chrono::milliseconds waited, Clock::time_point deadline) const {
    if (Clock::now() >= deadline) {
      return BootstrapError(who() + ": the rendezvous at " + address_ + " did not answer within " +
                            seconds_text(waited) +
                            " (is ddlrun stopped or overloaded? see its output)");
    }
    return BootstrapError(who() + ": lost the rendezvous at " + address_ + " (did ddlrun stop?)");
  }
  /// The server sent `what`, which is no answer of this protocol.
  BootstrapError garbled(const std::string& what) const {
    return BootstrapError(who() + ": the rendezvous at " + address_ + " sent what is no " +
                          std::string(kMagic) + " answer: " + what +
                          " (is something other than this job's ddlrun listening there?)");
  }
  static std::string too_long(const std::string& what, uint32_t n) {
    return what + " of " + std::to_string(n) + " bytes, over the " +
           std::to_string(kMaxValue >> 20) + " MiB limit";
  }
  int fd_;
  std::string address_;
  int rank_;
  int size_;
  uint32_t round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_rendezvous_bootstrap(const std::string& address,
                                                     const std::string& token, int rank, int size,
                                                     std::chrono::milliseconds timeout) {
  const auto endpoint = base::net::split_host_port(address);
  if (!endpoint) {
    throw BootstrapError("rank " + std::to_string(rank) + ": $DDL_RENDEZVOUS '" + address +
                         "' is not HOST:PORT");
  }
  const auto& [host, port] = *endpoint;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string last_error = "no address";
  for (;;) {
    // Not past the deadline: a host that drops the packets is not waited out.
    const base::net::Dialed d = base::net::dial(host, port, deadline);
    if (d.gai != 0) {
      throw BootstrapError("rank " + std::to_string(rank) + ": cannot resolve the rendezvous " +
                           address + ": " + gai_strerror(d.gai));
    }
    if (d.fd >= 0) {
      const auto waited =
          std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                   kChallengeTime);
      const std::string why =
          answer_challenge(d.fd, token, rank, size, Clock::now() + waited, waited);
      if (!why.empty()) {
        close(d.fd);
        throw BootstrapError("rank " + std::to_string(rank) + ": the rendezvous at " + address +
                             " " + why);
      }
      return std::make_unique<RendezvousClient>(d.fd, address, rank, size);
    }
    last_error = std::strerror(d.err);
    if (Clock::now() >= deadline) {
      throw BootstrapError("rank " + std::to_string(rank) + ": cannot reach the rendezvous at " +
                           address + " within " + seconds_text(timeout) + ": " + last_error +
                           " (is ddlrun still running, and is that address reachable from "
                           "this host?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// ---------------------------------------------------------------------------------------------
// Server

struct RendezvousServer::State {
  std::string token;
  int size = 0;
  std::vector<std::string> hosts;  ///< each rank's host, for messages; may be empty
  base::net::ListenerGuard guard;  ///< strangers' cap, hello deadline, refusals reported
  uint64_t accepted = 0;           ///< connections accepted so far: the next one's id
  int listen_fd = -1;
  base::AcceptRest rest;  ///< rests the listening socket while no descriptor is left
  int port = 0;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::thread thread;

  struct Client {
    int fd = -1;
    uint64_t id = 0;      ///< its name for the guard
    int rank = -1;        ///< -1 until the hello was read
    std::string nonce;    ///< the challenge it must answer
    std::string address;  ///< where it came from, for reports
    std::string in;
    bool waiting = false;
    uint32_t round = 0;
    Clock::time_point wait_until;
    std::string value;
  };
  std::vector<Client> clients;
  std::vector<int> by_rank;  ///< client index of each rank, -1 when not connected
  uint32_t round = 0;        ///< the round being gathered

  void answer_error(const std::string& message) {
    std::string msg;
    put_u32(msg, 1);
    put_str(msg, message);
    for (Client& c : clients) {
      if (c.waiting) {
        answer(c, msg);
        c.waiting = false;
      }
    }
  }

  /// Sends a rank its answer. One that takes none of it for kSendStall (stopped, hung) is cut
  /// off (its connection shut: it leaves the rendezvous), so that the others still hear theirs.
  void answer(const Client& c, const std::string& msg) {
    if (!write_all(c.fd, msg, kSendStall)) ::shutdown(c.fd, SHUT_RDWR);
  }

  std::vector<int> missing() const {
    std::vector<int> out;
    for (int r = 0; r < size; ++r) {
      const int i = by_rank[r];
      if (i < 0 || !clients[i].waiting || clients[i].round != round) out.push_back(r);
    }
    return out;
  }

  void try_complete() {
    if (!missing().empty()) return;
    std::string msg;
    put_u32(msg, 0);
    put_u32(msg, static_cast<uint32_t>(size));
    for (int r = 0; r < size; ++r)
      put_str(msg, clients[by_rank[r]].value);
    for (int r = 0; r < size; ++r) {
      Client& c = clients[by_rank[r]];
      answer(c, msg);
      c.waiting = false;
    }
    ++round;
  }

  /// Why the hello in `c.in` is refused; "" when it is accepted (c.rank set, the hello taken
  /// out of c.in) or not complete yet.
  std::string check_hello(Client& c) {
    if (!base::net::may_speak(c.in, kMagic)) {
      return "it does not speak " + std::string(kMagic) + " (it sent '" + base::excerpt(c.in, 32) +
             "')";
    }
    if (c.in.size() < kHelloSize) return "";
    const uint32_t rank = get_u32(c.in, kMagic.size());
    const uint32_t n = get_u32(c.in, kMagic.size() + 4);
    const std::string_view proof = std::string_view(c.in).substr(kMagic.size() + 8, 32);
    if (!base::net::proves(proof, token, kRankLabel, rank_context(c.nonce, rank, n))) {
      return "its proof of the job's token is wrong";
    }
    if (n != static_cast<uint32_t>(size)) {
      return "it is of a job of " + std::to_string(n) + " ranks, not " + std::to_string(size);
    }
    if (rank >= static_cast<uint32_t>(size))
      return "rank " + std::to_string(rank) + " is out of range 0.." + std::to_string(size - 1);
    if (by_rank[rank] >= 0) return "rank " + std::to_string(rank) + " came already";
    c.rank = static_cast<int>(rank);
    c.in.erase(0, kHelloSize);
    return "";
  }

  /// Parses what a client sent; false to drop it (a refused hello is reported).
  bool consume(Client& c) {
    if (c.rank < 0) {
      if (const std::string why = check_hello(c); !why.empty()) {
        guard.refused("rendezvous: refused a connection from " + c.address + ": " + why);
        if (c.in.size() == kHelloSize) tell_refused(c, why);
        return false;
      }
      if (c.rank < 0) return true;
    }
    while (c.in.size() >= 12) {
      const uint32_t r = get_u32(c.in, 0), wait_ms = get_u32(c.in, 4), len = get_u32(c.in, 8);
      if (len > kMaxValue) return false;
      if (c.in.size() < 12 + len) return true;
      c.round = r;
      c.value = c.in.substr(12, len);
      c.waiting = true;
      c.wait_until = Clock::now() + std::chrono::milliseconds(wait_ms);
      c.in.erase(0, 12 + len);
    }
    return true;
  }

  /// Tells a refused rank why, as a failed round (status 1) that its first allgather reads: at
  /// once or not at all (a rank that does not read cannot hold the server up).
  void tell_refused(const Client& c, const std::string& why) {
    const std::string text = "refused by the rendezvous at " +
                             base::net::local_address(c.fd, true) + ": " + why +
                             "; is it a process of this job, started by its ddlrun?";
    std::string msg;
    put_u32(msg, 1);
    put_str(msg, text);
    (void)send(c.fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  /// A new connection, challenged at once: the magic and a fresh nonce, which fit the new
  /// socket's buffer (sent at once, or the connection is dropped). The oldest of too many
  /// connections without hello is closed (the guard's choice).
  void accept_one() {
    const int fd = rest.accept(listen_fd, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // out of descriptors, `rest` rests the listening socket
    Client c;
    c.fd = fd;
    c.id = ++accepted;
    c.address = base::net::peer_address(fd, true);
    c.nonce = base::net::nonce();
    const std::string challenge = std::string(kMagic) + c.nonce;
    if (send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(challenge.size())) {
      clients.push_back(std::move(c));
      close_clients(guard.arrive(clients.back().id));
    } else {
      close(fd);
    }
  }

  /// Closes the connections the guard gave up on (dropped by the loop).
  void close_clients(const std::vector<uint64_t>& ids) {
    for (Client& c : clients) {
      if (c.fd >= 0 && std::find(ids.begin(), ids.end(), c.id) != ids.end()) {
        close(c.fd);
        c.fd = -1;
      }
    }
  }

  /// Reads what client `i` sent: before its hello is accepted no further than the hello.
  /// False to drop it.
  bool read_client(size_t i) {
    Client& c = clients[i];
    if (c.fd < 0) return false;
    char buf[65536];
    const size_t want = c.rank < 0 ? kHelloSize - c.in.size() : sizeof buf;
    const ssize_t n = recv(c.fd, buf, want, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n < 0) return true;
    c.in.append(buf, static_cast<size_t>(n));
    const int before = c.rank;
    if (!consume(c)) return false;
    if (before < 0 && c.rank >= 0) {
      by_rank[c.rank] = static_cast<int>(i);
      guard.settled(c.id);
    }
    return true;
  }

  /// Drops the clients at indices `drop` (ascending); a rank's leaving fails the round.
  void drop_clients(const std::vector<size_t>& drop) {
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
      Client& c = clients[*it];
      const int rank = c.rank;
      if (c.fd >= 0) close(c.fd);
      guard.settled(c.id);
      if (rank >= 0) by_rank[rank] = -1;
      clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(*it));
      for (int r = 0; r < size; ++r)
        if (by_rank[r] > static_cast<int>(*it)) --by_rank[r];
      if (rank >= 0) {
        answer_error(rank_list({rank}, hosts) +
                     " left the rendezvous (its process ended or lost its connection)");
      }
    }
  }

  /// The first rank to give up decides: everyone waiting hears who is missing.
  void check_waits() {
    for (const Client& c : clients) {
      if (c.waiting && Clock::now() > c.wait_until) {
        const std::vector<int> m = missing();
        answer_error(rank_list(m, hosts) + (m.size() == 1 ? " has" : " have") +
                     " not joined the rendezvous in time (did they start? see their output)");
        break;
      }
    }
  }

  void run() {
    while (!stop) {
      // The listening socket waits while no descriptor is left, and while every stranger's
      // place is held by one within its grace.
      const Clock::time_point room = guard.room_at();
      const bool roomy = Clock::now() >= room;
      std::vector<pollfd> fds = {{wake[0], POLLIN, 0},
                                 {listen_fd, roomy ? rest.events() : short{0}, 0}};
      for (const Client& c : clients)
        fds.push_back({c.fd, POLLIN, 0});
      poll(fds.data(), fds.size(), roomy ? rest.poll_ms(200) : base::Deadline(room).poll_ms(200));
      if (stop) break;
      if (fds[1].revents & POLLIN) accept_one();
      close_clients(guard.overdue());
      std::vector<size_t> drop;
      for (size_t i = 0; i + 2 < fds.size(); ++i) {
        bool ok = clients[i].fd >= 0;
        if (ok && fds[i + 2].revents != 0) ok = read_client(i);
        if (!ok) drop.push_back(i);
      }
      for (size_t i = fds.size() - 2; i < clients.size(); ++i) {
        if (clients[i].fd < 0) drop.push_back(i);  // closed by the guard
      }
      drop_clients(drop);
      try_complete();
      check_waits();
    }
  }
};

namespace {

/// A listening socket on `address` (numeric IPv4 or IPv6; "": every address, IPv6 with IPv4
/// mapped) and `port`, non-blocking, and the port it got.
base::net::Listening listen_socket(const std::string& address, int port) {
  const base::net::Listening l = base::net::listen_tcp(address, port, 1024);
  if (l.bad_address) {
    throw BootstrapError("rendezvous: '" + address + "' is not a numeric IP address to listen on");
  }
  if (l.fd < 0) {
    const std::string where = (address.empty() ? "*" : address) + ":" + std::to_string(port);
    throw BootstrapError("rendezvous: cannot listen on " + where + ": " + std::strerror(errno));
  }
  return l;
}

}  // namespace

RendezvousServer::RendezvousServer(std::string token, int size, int port,
                                   std::vector<std::string> hosts, Report report,
                                   const std::string& bind_address)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.token = std::move(token);
  s.size = size;
  s.hosts = std::move(hosts);
  s.guard = base::net::ListenerGuard({.hello_time = kHelloTime}, std::move(report));
  s.by_rank.assign(size, -1);
  const base::net::Listening listening = listen_socket(bind_address, port);
  s.listen_fd = listening.fd;
  s.port = listening.port;
  s.guard.name("rendezvous", s.port, "this job's ranks", "this job's ranks");
  if (pipe2(s.wake, O_CLOEXEC) != 0) {
    close(s.listen_fd);
    throw BootstrapError(std::string("rendezvous: pipe: ") + std::strerror(errno));
  }
  s.thread = quiet_thread([&s] { s.run(); });
}

RendezvousServer::~RendezvousServer() {
  State& s = *state_;
  s.stop = true;
  [[maybe_unused]] ssize_t n = write(s.wake[1], "x", 1);
  s.thread.join();
  for (auto& c : s.clients)
    if (c.fd >= 0) close(c.fd);
  close(s.listen_fd);
  close(s.wake[0]);
  close(s.wake[1]);
}

int RendezvousServer::port() const {
  return state_->port;
}

}  // namespace ddl::comm
