#pragma once
// File descriptors: writing all of a buffer, deadlines for poll(), and accepting connections
// on a listening socket without spinning when no descriptor is left.

#include <chrono>
#include <string_view>

namespace ddl::base {

/// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns 0, or the errno of
/// the write that failed (EIO when a write took nothing).
int write_all(int fd, std::string_view data);

/// A point in time that waits share: "retry until then", "poll at most until then".
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(Clock::duration budget) : at_(Clock::now() + budget) {}
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool passed() const { return Clock::now() >= at_; }
  /// Time left, never negative.
  Clock::duration left() const;
  /// Milliseconds left for poll(), rounded up, between 0 and `cap_ms`.
  int poll_ms(int cap_ms = 1000) const;

 private:
  Clock::time_point at_;
};

/// accept4() for a poll() loop on a listening socket, every listener's (libddl's TCP transport
/// and rendezvous, ddlrun's node rendezvous, the link agent).
///
/// How it works: when the process (or the system) has no descriptor or memory left for a new
/// connection, accept4() fails with EMFILE, ENFILE, ENOBUFS or ENOMEM, the connection stays
/// queued and the listening socket stays readable, so a loop that polled it again at once would
/// spin a core at 100% until a descriptor freed (a flood of connections, a low ulimit -n).
/// After such a failure the socket rests for kRest: listening() is false, the loop polls it for
/// nothing and wakes when the rest ends (poll_ms()), and tries again; the queued connection is
/// taken once a descriptor frees. Other failures (a connection reset while queued) rest nothing.
class AcceptRest {
 public:
  using Clock = std::chrono::steady_clock;
  /// How long the listening socket rests once accept4() found no descriptor.
  static constexpr std::chrono::milliseconds kRest{100};

  /// accept4(listen_fd, nullptr, nullptr, flags): the new descriptor, or -1 with errno as
  /// accept4() left it (a rest begins when it failed for want of descriptors or memory).
  int accept(int listen_fd, int flags);
  /// Whether to poll the listening socket now: false while it rests.
  bool listening() const { return Clock::now() >= until_; }
  /// What to poll the listening socket for: POLLIN, or nothing while it rests.
  short events() const;
  /// When the rest ends (a time past when there is none).
  Clock::time_point until() const { return until_; }
  /// `cap_ms`, or less while resting, so that poll() wakes when the rest ends.
  int poll_ms(int cap_ms) const;

 private:
  Clock::time_point until_{};
};

}  // namespace ddl::base
