#pragma once
// Listening and the socket chores every server and client of ours shares (listen_tcp, the
// peer's address, "HOST:PORT", reading with a deadline), and what every listener of ours
// (libddl's rendezvous and TCP acceptor, per-node mode's node 0) does so that strangers cannot
// use it up: a cap on connections that have not said hello, a grace that keeps a real peer's
// place, a deadline for the hello, and a bound on the refusals it reports.
//
// How it works: the listener tells the guard of each connection it accepts (arrive()) and of
// each that said hello or closed (settled()). At most `max_waiting` connections wait for
// their hello at once: while that many wait, room_at() is when the oldest has had its `grace`
// and the listener leaves its listening socket alone until then (new connections wait in the
// kernel's queue). A connection that comes then makes arrive() give back the oldest waiting
// ones to close, each past its grace (a peer answers within a round trip, so the oldest is the
// likeliest stranger; a real peer keeps its place however many come after it), and the first
// time that happens `crowded` is reported. overdue() gives back the connections that waited
// past `hello_time`. refused() reports the first `max_reports` refusals, then `more_refused`
// once: a stranger that keeps trying cannot fill the output. A flood of silent connections
// thus costs the listener `max_waiting` descriptors.

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddl::base::net {

/// A listening TCP socket and the port it listens on.
struct Listening {
  int fd = -1;  ///< -1 when it could not listen (errno says why)
  int port = 0;
  bool bad_address = false;  ///< the address to listen on is not a numeric IP address
};

/// A listening socket (non-blocking, close-on-exec, SO_REUSEADDR) on `address` (numeric IPv4
/// or IPv6; "": every address, IPv6 with IPv4 mapped, or IPv4 where there is no IPv6) and
/// `port` (0: any free one), with a queue of `backlog` connections.
Listening listen_tcp(const std::string& address, int port, int backlog);

/// The address `fd` is connected to ("10.200.0.10", "fe80::1"; IPv4 mapped into IPv6 as
/// IPv4), with ":PORT" when `with_port`; "?" when unknown. For reports.
std::string peer_address(int fd, bool with_port);
/// The address `fd` is bound to (accepted at), as peer_address() writes it.
std::string local_address(int fd, bool with_port);

/// `host` and `port` as "HOST:PORT", an IPv6 address in brackets ("[fe80::1]:22"; one already in
/// brackets kept as it is): what split_host_port() splits.
std::string join_host_port(std::string_view host, unsigned port);
/// "HOST:PORT" ("[v6]:PORT") split into host (without brackets) and port; nullopt when there
/// is no colon or no host.
std::optional<std::pair<std::string, std::string>> split_host_port(std::string_view endpoint);

/// How dial() ended: a connected socket, or why not.
struct Dialed {
  int fd = -1;  ///< connected, close-on-exec, TCP_NODELAY; -1: none connected
  int gai = 0;  ///< getaddrinfo's error (gai_strerror) when `host` did not resolve
  int err = 0;  ///< else the errno of the last address tried (ETIMEDOUT at the deadline)
};
/// Connects to `host`:`port`: each of its addresses in turn until one connects, each
/// connect waited for until `deadline` at most (a host that drops the packets is not waited
/// out). `prepare`, when given, runs on each socket before its connect (buffer sizes). The
/// socket comes back non-blocking, or blocking when `blocking`.
Dialed dial(const std::string& host, const std::string& port,
            std::chrono::steady_clock::time_point deadline,
            const std::function<void(int fd)>& prepare = {}, bool blocking = false);
/// connect() of the non-blocking socket `fd` to `to`, waiting for it until `deadline` at most:
/// 0, or the errno of the failure (ETIMEDOUT at the deadline).
int connect_before(int fd, const sockaddr* to, socklen_t length,
                   std::chrono::steady_clock::time_point deadline);

/// Reads up to `n` bytes into `out` before `deadline`: how many came before the end of the
/// stream, an error or the deadline.
size_t read_upto(int fd, char* out, size_t n, std::chrono::steady_clock::time_point deadline);

/// A guard's limits; the defaults are ddlrun's servers' (libddl's rendezvous, node 0's).
struct GuardLimits {
  /// The most connections that wait for their hello at once (strangers' included).
  size_t max_waiting = 32;
  /// How long an accepted connection keeps its place however many come after it.
  std::chrono::milliseconds grace{200};
  /// How long a connection has to say hello.
  std::chrono::milliseconds hello_time{5000};
  /// How many refused connections are reported; the rest as one line.
  int max_reports = 10;
};

/// A listener's bookkeeping of the connections that have not said hello (see the top).
class ListenerGuard {
 public:
  using Clock = std::chrono::steady_clock;
  /// A connection, as the listener names it.
  using Id = uint64_t;
  using Report = std::function<void(const std::string&)>;

  explicit ListenerGuard(GuardLimits limits = {}, Report report = {})
      : limits_(limits), report_(report) {}
  /// Names the listener in its two notices, once bound: "NAME: more than N connections have
  /// not said hello; closing the oldest (is something other than CROWDING connecting to port
  /// PORT?)" and "NAME: more refused connections are not shown (is something other than
  /// REFUSED connecting to port PORT?)". Without it the guard reports no notice.
  void name(const std::string& name, int port, const std::string& crowding,
            const std::string& refused);

  /// When there is room for one more connection: a time past while fewer than max_waiting
  /// wait, else when the oldest of them has had its grace.
  Clock::time_point room_at() const;
  /// Connection `id`, accepted now, waits for its hello. Gives back the connections to close
  /// to make room for it (the oldest past their grace; never `id`), no longer waiting.
  std::vector<Id> arrive(Id id);
  /// Connection `id` said hello, or closed: it no longer waits.
  void settled(Id id);
  /// The connections that waited past hello_time, no longer waiting.
  std::vector<Id> overdue();
  /// When the next connection waiting will be overdue (a time far ahead when none waits).
  Clock::time_point next_due() const;
  /// How many connections wait for their hello.
  size_t waiting() const { return waiting_.size(); }
  /// Reports refusal `line`, or only counts it past max_reports (see the top).
  void refused(const std::string& line);

 private:
  struct Waiting {
    Id id;
    Clock::time_point since;
  };
  void tell(const std::string& line) const {
    if (report_ && !line.empty()) report_(line);
  }
  GuardLimits limits_;
  Report report_;
  std::string crowded_;          ///< reported when a waiting connection is first closed for room
  std::string more_refused_;     ///< reported after max_reports refusals
  std::deque<Waiting> waiting_;  ///< oldest first
  int refusals_ = 0;
  bool crowded_told_ = false;
};

}  // namespace ddl::base::net
