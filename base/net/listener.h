#pragma once
// What every listener of ours (libddl's rendezvous and TCP acceptor, per-node mode's node 0)
// does so that strangers cannot use it up: a cap on connections that have not said hello, a
// grace that keeps a real peer's place, a deadline for the hello, and a bound on the refusals
// it reports.
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

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace ddl::base::net {

/// A guard's limits.
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

/// The limits of ddlrun's servers (libddl's rendezvous, node 0's rendezvous) with `hello_time`.
GuardLimits server_limits(std::chrono::milliseconds hello_time);

/// The lines a guard reports (see the top of this file); "" for none.
struct GuardNotices {
  std::string crowded;       ///< the first time a waiting connection is closed to make room
  std::string more_refused;  ///< after max_reports refusals
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
  /// The lines to report (they name the port, known once the listener is bound).
  void set_notices(GuardNotices notices) { notices_ = std::move(notices); }

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
  GuardNotices notices_;
  std::deque<Waiting> waiting_;  ///< oldest first
  int refusals_ = 0;
  bool crowded_told_ = false;
};

}  // namespace ddl::base::net
