// The link agent (run_link_agent): one per host while --probe-links measures.
//
// How it works: the agent listens on a TCP port of every address and tells ddlrun the port on
// its stdout. ddlrun then sends it lines: a token that other agents must present, and "test
// ADDRESS PORT" for each pair it should measure as the sender. A test is one TCP connection:
//  1. the connect, within kConnectMs: an agent whose port a firewall drops or refuses is
//     "unreachable" (ddlrun then measures the pair from that agent's side), not waited out;
//  2. challenge and response (base/net/handshake.h): the receiver sends "ddl-link-test 2 NONCE"
//     (a fresh nonce in hex), the sender answers link_proof(token, NONCE), in hex: the token
//     never crosses the network, and a recorded answer is useless against the next nonce;
//  3. latency: kPings one-byte ping-pongs; half the median round trip;
//  4. bandwidth: the sender writes for kBulkSeconds (at most kBulkBytes), then shuts down its
//     side; the receiver times what arrives and answers "BYTES SECONDS" over the second half of
//     the time it received: a token-bucket burst and TCP's slow start land in the first half.
// A single poll loop serves both sides, one at a time: ddlrun puts each host in at most one
// pair per round. The answer to the challenge has one deadline (kTokenMs in all, however it
// trickles in),
// the rest of a test another (kTestMs); while it serves a connection the agent watches its
// stdin, and a line or the end of it from ddlrun ends that connection at once, so a stranger
// can neither delay ddlrun's requests nor keep the agent alive. The agent ends when its stdin
// does, or after a minute without a line or a connection. Out of descriptors, its listening
// socket rests rather than spin (base::AcceptRest), and the connection is taken once one frees.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/digest.h"
#include "base/fd.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "mapper/link_probe.h"

namespace ddl::mapper {

namespace {

constexpr int kPings = 8;
constexpr double kBulkSeconds = 0.06;
constexpr std::size_t kBulkBytes = std::size_t{64} << 20;
constexpr std::size_t kChunk = std::size_t{64} << 10;
constexpr int kSendBuffer = 512 << 10;  // bounds what is still in flight when the sender stops
constexpr int kConnectMs = 1000;        // to connect: a firewall's DROP is not waited out
constexpr int kTokenMs = 5000;          // for the whole answer to the challenge
constexpr std::string_view kChallenge = "ddl-link-test 2 ";
constexpr int kTestMs = 8000;  // for the rest of a test (ddlrun waits 10 s for it)
constexpr int kIdleMs = 60'000;

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// A socket closed when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

/// Thrown inside a test; its text becomes "error TEXT", or "unreachable TEXT" when the other
/// agent's port could not be connected to.
struct TestFailed {
  std::string why;
  bool unreachable = false;
};

[[noreturn]] void failed(const std::string& what) {
  throw TestFailed{what + ": " + base::errno_text(errno)};
}

/// What bounds the I/O of a test: its deadline, and ddlrun's channel (`stop_fd`), whose
/// `stop_events` (or its end) stop the test at once.
struct Bounds {
  base::Deadline deadline;
  int stop_fd = -1;
  short stop_events = 0;
};

/// Waits until `fd` is ready for `events`, until the deadline or ddlrun's channel stirs.
void wait_for(int fd, short events, const char* what, const Bounds& b) {
  while (true) {
    pollfd p[2] = {{fd, events, 0}, {b.stop_fd, static_cast<short>(b.stop_events | POLLRDHUP), 0}};
    const int n = ::poll(p, b.stop_fd >= 0 ? 2 : 1, b.deadline.poll_ms());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed(what);
    if (p[1].revents & (b.stop_events | POLLHUP | POLLRDHUP | POLLERR)) {
      throw TestFailed{std::string("stopped ") + what + ": ddlrun spoke or left"};
    }
    if (p[0].revents != 0) return;
    if (b.deadline.passed()) throw TestFailed{std::string("timed out ") + what};
  }
}

void send_all(int fd, const char* data, std::size_t size, const Bounds& b) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(fd, POLLOUT, "sending", b);
      continue;
    }
    if (n < 0) failed("send");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

/// Reads up to `size` bytes: their count, 0 at EOF.
std::size_t receive_some(int fd, char* data, std::size_t size, const Bounds& b) {
  for (;;) {
    wait_for(fd, POLLIN, "receiving", b);
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) failed("recv");
  }
}

/// Reads up to a '\n' (not kept); throws at EOF.
std::string receive_line(int fd, const Bounds& b) {
  std::string line;
  char c = 0;
  while (receive_some(fd, &c, 1, b) == 1) {
    if (c == '\n') return line;
    if (line.size() > 256) break;
    line += c;
  }
  throw TestFailed{"the other agent closed the connection"};
}

void set_int(int fd, int level, int option, int value) {
  ::setsockopt(fd, level, option, &value, sizeof value);
}

/// Waits for the connect of `fd` to `where` to finish: at most kConnectMs (and within `b`).
/// A port that does not answer or refuses makes the test "unreachable".
void finish_connect(int fd, const std::string& where, const Bounds& b) {
  Bounds connecting = b;
  if (connecting.deadline.left() > std::chrono::milliseconds(kConnectMs))
    connecting.deadline = base::Deadline(std::chrono::milliseconds(kConnectMs));
  try {
    wait_for(fd, POLLOUT, ("connecting to " + where).c_str(), connecting);
  } catch (TestFailed& e) {
    if (connecting.deadline.passed() && !b.deadline.passed()) {
      throw TestFailed{
          "no answer from " + where + " within " + std::to_string(kConnectMs / 1000) + " s", true};
    }
    throw;
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) throw TestFailed{"cannot connect to " + where + ": " + base::errno_text(err), true};
}

/// A TCP connection to address:port, made within the bounds (the connect within kConnectMs).
int connect_to(const std::string& address, const std::string& port, const Bounds& b) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(address.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw TestFailed{"cannot resolve " + address + ": " + ::gai_strerror(rc)};
  }
  const std::string where = address + ":" + port;
  Socket s(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int rc = s.fd < 0 ? -1 : ::connect(s.fd, found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  ::freeaddrinfo(found);
  if (s.fd < 0) failed("socket");
  if (rc != 0 && connect_errno != EINPROGRESS) {
    throw TestFailed{"cannot connect to " + where + ": " + base::errno_text(connect_errno), true};
  }
  finish_connect(s.fd, where, b);
  set_int(s.fd, IPPROTO_TCP, TCP_NODELAY, 1);
  set_int(s.fd, SOL_SOCKET, SO_SNDBUF, kSendBuffer);
  const int fd = s.fd;
  s.fd = -1;
  return fd;
}

/// The sender's answer to the receiver's challenge line, sent on `fd`.
void answer_challenge(int fd, const std::string& where, const std::string& token, const Bounds& b) {
  const std::string line = receive_line(fd, b);
  const std::optional<std::string> nonce = parse_link_challenge(line);
  if (!nonce) {
    throw TestFailed{"the agent at " + where + " sent '" + base::excerpt(line) +
                     "', not a link agent's challenge; is ddlrun the same version there?"};
  }
  const std::string proof = link_proof(token, *nonce) + "\n";
  send_all(fd, proof.data(), proof.size(), b);
}

/// The sender's side of a test: "ok LATENCY BANDWIDTH".
std::string run_test(const std::string& address, const std::string& port, const std::string& token,
                     int in_fd) {
  const Bounds b{base::Deadline(std::chrono::milliseconds(kTestMs)), in_fd, 0};
  Socket s(connect_to(address, port, b));
  answer_challenge(s.fd, address + ":" + port, token, b);
  std::vector<double> rtt;
  char byte = 'p';
  for (int i = 0; i < kPings; ++i) {
    const Clock::time_point t = Clock::now();
    send_all(s.fd, &byte, 1, b);
    if (receive_some(s.fd, &byte, 1, b) != 1)
      throw TestFailed{"the other agent closed the connection"};
    rtt.push_back(since(t));
  }
  std::sort(rtt.begin(), rtt.end());
  const std::vector<char> chunk(kChunk, 'x');
  const Clock::time_point start = Clock::now();
  for (std::size_t sent = 0; sent < kBulkBytes && since(start) < kBulkSeconds; sent += kChunk)
    send_all(s.fd, chunk.data(), chunk.size(), b);
  ::shutdown(s.fd, SHUT_WR);
  const std::string reply = receive_line(s.fd, b);
  double bytes = 0, seconds = 0;
  if (std::sscanf(reply.c_str(), "%lf %lf", &bytes, &seconds) != 2 || seconds <= 0) {
    throw TestFailed{"the other agent answered '" + reply + "'"};
  }
  char out[96];
  std::snprintf(out, sizeof out, "ok %.9g %.9g", rtt[rtt.size() / 2] / 2, bytes / seconds);
  return out;
}

/// The receiver's side: challenges the sender with `nonce`, answers the pings, times the bulk
/// transfer. Any line or the end of `in_fd` (ddlrun's channel) stops it.
void serve_test(int fd, const std::string& token, int in_fd, const std::string& nonce) {
  const Bounds hello{base::Deadline(std::chrono::milliseconds(kTokenMs)), in_fd, POLLIN};
  const std::string challenge = std::string(kChallenge) + nonce + "\n";
  send_all(fd, challenge.data(), challenge.size(), hello);
  if (token.empty() || !base::same_secret(receive_line(fd, hello), link_proof(token, nonce))) {
    return;  // a stranger
  }
  const Bounds b{base::Deadline(std::chrono::milliseconds(kTestMs)), in_fd, POLLIN};
  char byte = 0;
  for (int i = 0; i < kPings; ++i) {
    if (receive_some(fd, &byte, 1, b) != 1) return;
    send_all(fd, &byte, 1, b);
  }
  std::vector<std::pair<double, std::size_t>> arrived;  // (time, bytes so far) per read
  std::vector<char> buffer(kChunk);
  const Clock::time_point start = Clock::now();
  std::size_t total = 0;
  for (std::size_t n; (n = receive_some(fd, buffer.data(), buffer.size(), b)) > 0;) {
    total += n;
    arrived.emplace_back(since(start), total);
  }
  if (arrived.size() < 2) throw TestFailed{"no bulk data arrived"};
  const double first = arrived.front().first, last = arrived.back().first;
  const auto mid = std::lower_bound(arrived.begin(), arrived.end(),
                                    std::make_pair((first + last) / 2, std::size_t{0}));
  const auto from = mid == arrived.end() || mid->first >= last ? arrived.begin() : mid;
  char out[64];
  std::snprintf(out, sizeof out, "%zu %.9g\n", total - from->second, last - from->first);
  send_all(fd, out, std::strlen(out), b);
}

/// One line from ddlrun: the answer to send back ("" for none).
std::string answer(const std::string& line, std::string& token, int in_fd) {
  const AgentRequest r = parse_agent_request(line);
  if (r.kind == AgentRequest::Kind::kToken) {
    token = r.token;
    return "ready";
  }
  if (r.kind == AgentRequest::Kind::kUnknown) {
    return "error unknown request '" + base::excerpt(line, 256) + "'";
  }
  try {
    return run_test(r.address, r.port, token, in_fd);
  } catch (const TestFailed& e) {
    return (e.unreachable ? "unreachable " : "error ") + e.why;
  }
}

}  // namespace

AgentRequest parse_agent_request(const std::string& line) {
  AgentRequest r;
  if (line == "end") {
    r.kind = AgentRequest::Kind::kEnd;
    return r;
  }
  if (line.starts_with("token ")) {
    r.kind = AgentRequest::Kind::kToken;
    r.token = line.substr(6);
    return r;
  }
  char address[256], port[16];
  if (std::sscanf(line.c_str(), "test %255s %15s", address, port) == 2) {
    r.kind = AgentRequest::Kind::kTest;
    r.address = address;
    r.port = port;
  }
  return r;
}

std::string link_proof(const std::string& token, const std::string& nonce) {
  return base::hex(base::net::proof(token, "ddl link test: ", nonce));
}

std::optional<std::string> parse_link_challenge(const std::string& line) {
  if (!line.starts_with(kChallenge)) return std::nullopt;
  const std::string nonce = line.substr(kChallenge.size());
  if (nonce.size() != 2 * base::net::kNonceSize ||
      nonce.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return std::nullopt;
  }
  return nonce;
}

bool serve_link_test(int fd, const std::string& token, int stop_fd, const std::string& nonce) {
  try {
    serve_test(fd, token, stop_fd, nonce);
    return true;
  } catch (const TestFailed&) {
    return false;
  }
}

namespace {

/// Serves the listening socket and ddlrun's lines until stdin ends (0) or a minute passes
/// without a connection or a line, or ddlrun cannot be written to (1).
int serve_agent(int in_fd, int out_fd, int listen_fd) {
  std::string token, pending;
  base::AcceptRest rest;  // out of descriptors the listening socket rests rather than spin
  base::Deadline idle{std::chrono::milliseconds(kIdleMs)};
  for (;;) {
    pollfd p[2] = {{in_fd, POLLIN, 0}, {listen_fd, rest.events(), 0}};
    const int n = ::poll(p, 2, rest.poll_ms(idle.poll_ms(kIdleMs)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (n == 0 && idle.passed())) return 1;
    if (n == 0) continue;  // a rest ended
    idle = base::Deadline(std::chrono::milliseconds(kIdleMs));
    if (p[1].revents & POLLIN) {
      const Socket peer(rest.accept(listen_fd, SOCK_CLOEXEC));
      try {
        if (peer.fd >= 0) serve_test(peer.fd, token, in_fd, base::hex(base::net::nonce()));
      } catch (const TestFailed&) {  // the sender reports it
      }
    }
    if (p[0].revents == 0) continue;
    char buf[4096];
    const ssize_t got = ::read(in_fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    pending.append(buf, static_cast<std::size_t>(got));
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (parse_agent_request(line).kind == AgentRequest::Kind::kEnd) return 0;
      const std::string reply = answer(line, token, in_fd);
      if (!reply.empty() && base::write_all(out_fd, reply + "\n") != 0) return 1;
    }
  }
}

}  // namespace

int run_link_agent(int in_fd, int out_fd, int want_port, const std::string& seen_from) {
  const base::net::Listening listening = base::net::listen_tcp("", want_port, 16);
  const int listen_fd = listening.fd;
  if (listen_fd < 0) {
    const std::string which =
        want_port == 0 ? "a TCP port" : "TCP port " + std::to_string(want_port);
    base::write_all(out_fd,
                    "error cannot listen on " + which + ": " + base::errno_text(errno) + "\n");
    return 1;
  }
  const Socket listener(listen_fd);
  // The address ddlrun's host connected from, as this host's sshd saw it (SSH_CONNECTION):
  // where the other hosts reach ddlrun's own host. Below the launch tree's first level the
  // caller says it (this host was logged in to from its tree parent).
  const char* ssh = std::getenv("SSH_CONNECTION");
  std::string client = ssh && *ssh ? std::string(ssh).substr(0, std::strcspn(ssh, " ")) : "-";
  if (!seen_from.empty()) client = seen_from;
  if (base::write_all(out_fd, "ddl-link-agent 2 " + std::to_string(listening.port) + " " + client +
                                  "\n") != 0) {
    return 1;
  }
  return serve_agent(in_fd, out_fd, listen_fd);
}

}  // namespace ddl::mapper
