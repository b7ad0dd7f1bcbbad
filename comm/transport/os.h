#pragma once
// Small operating-system helpers that the transports, the bootstrap and the node group share.

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

}  // namespace ddl::comm::transport
