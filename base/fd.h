#pragma once
// File descriptors: writing all of a buffer, and deadlines for poll().

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

}  // namespace ddl::base
