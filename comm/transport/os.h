#pragma once
// Small operating-system helpers that the transports, the bootstrap and the node group share.

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>

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
/// connect() of the non-blocking socket `fd` to `to`, waiting for it until `deadline` at most
/// (a host that drops the connection's packets is not waited out): 0, or the errno of the
/// failure (ETIMEDOUT at the deadline).
int connect_before(int fd, const sockaddr* to, socklen_t length,
                   std::chrono::steady_clock::time_point deadline);
/// Why the shared-memory file `fd` (named `name`) must not be joined, or "" when it belongs to
/// this process's user: segment names can be guessed, and another user of the host who made
/// one first (world-writable, its magic set) would otherwise be joined.
std::string foreign_segment(int fd, const std::string& name);

}  // namespace ddl::comm::transport
