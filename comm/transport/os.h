#pragma once
// Small operating-system helpers that the transports, the bootstrap and the node group share.

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "base/text.h"

namespace ddl::comm::transport {

using base::seconds_text;
/// The job id with only characters that are safe in a file name, at most 64 of them ("job"
/// when none is left).
std::string safe_job(const std::string& job);
/// A pidfd for `pid` (readable once the process has exited), or -1 where the kernel has none.
int open_pidfd(int pid);
/// Sizes the shared-memory file `fd` to `bytes`, reserves its pages (posix_fallocate: a full
/// tmpfs fails here, not with SIGBUS at the first touch) and maps it shared, read and write.
/// Returns the mapping, or nullptr with *err the errno of the step that failed; `fd` stays
/// open either way.
void* map_reserved(int fd, size_t bytes, int* err);
/// Why the shared-memory file `fd` (named `name`) must not be joined, or "" when it belongs to
/// this process's user: segment names can be guessed, and another user of the host who made
/// one first (world-writable, its magic set) would otherwise be joined.
std::string foreign_segment(int fd, const std::string& name);
/// shm_open of a new shared-memory file `name` (read-write, mode 0600), replacing one of that
/// name left by a crashed process with the same pid: the descriptor, or -1 with errno set.
int create_segment_file(const std::string& name);
/// Whether a mapped segment of `bytes` is finished: its maker stored its magic, its size is
/// right.
using SegmentReady = std::function<bool(const void* segment, size_t bytes)>;
/// The shared-memory file `name` mapped whole, read and write, once it exists, holds at least
/// `min_bytes` and `ready` says its maker has finished it; nullptr before. Throws TransportError
/// "<who>shm_open NAME: why" when it cannot be opened, and "<who>" before foreign_segment()'s
/// text when it is another user's.
void* attach_segment_file(const std::string& name, const std::string& who, size_t min_bytes,
                          const SegmentReady& ready);
/// `attempt()` until it returns non-null, napping between tries (from `nap`, doubling up to
/// 10 ms); nullptr once `timeout` has passed.
template <typename Attempt>
auto retry_until(std::chrono::milliseconds timeout, std::chrono::microseconds nap,
                 Attempt&& attempt) -> decltype(attempt()) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto* got = attempt()) return got;
    if (std::chrono::steady_clock::now() >= deadline) return nullptr;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(10'000));
  }
}

}  // namespace ddl::comm::transport
