#pragma once
// Small operating-system helpers that the transports, the bootstrap and the node group share.

#include <chrono>
#include <string>

namespace ddl::comm::transport {

/// "30 s", "0.5 s": a timeout as the error messages print it.
std::string seconds_text(std::chrono::milliseconds d);
/// The job id with only characters that are safe in a file name, at most 64 of them ("job"
/// when none is left).
std::string safe_job(const std::string& job);
/// A pidfd for `pid` (readable once the process has exited), or -1 where the kernel has none.
int open_pidfd(int pid);

}  // namespace ddl::comm::transport
