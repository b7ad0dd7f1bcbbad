#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

namespace ddl::launcher::ssh {

/// An agent's channel up to its parent (ddlrun, or the agent above it in the launch tree),
/// written by a thread of its own: put() queues the bytes and returns at once, so that a slow or
/// stopped parent (a full channel) holds up no thread that sends, least of all an interior
/// agent's relay threads, which must go on reading the hosts below it (their heartbeats).
///
/// How it works: one queue (a string) under a mutex; the writer thread swaps it out and writes
/// it with blocking writes, in the order put() took the bytes. What waits is bounded by what
/// the parent lets come up (output goes only within the windows it grants, M frames); the rest
/// is heartbeats, exits and notes. A failed write (the channel is gone) makes every later
/// put() return false. The writer thread is detached: an agent leaves with _exit.
class Upward {
 public:
  explicit Upward(int fd);
  Upward(const Upward&) = delete;
  Upward& operator=(const Upward&) = delete;

  /// Queues `bytes`; false once a write failed.
  bool put(std::string_view bytes);
  /// Waits until everything queued is written (true), a write failed or `timeout` passed.
  bool flush(std::chrono::milliseconds timeout);
  /// Bytes queued and not yet handed to write().
  size_t waiting();

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    std::string queue;
    bool writing = false;
    bool failed = false;
  };
  static void write_loop(int fd, Shared& shared);

  Shared* shared_;  ///< never freed: the detached writer may outlive this object
};

}  // namespace ddl::launcher::ssh
