#pragma once
// Small operating-system helpers that the transports, the bootstrap and the node group share.

#include <string>

#include "base/text.h"

namespace ddl::comm::transport {

using base::seconds_text;
/// The job id with only characters that are safe in a file name, at most 64 of them ("job"
/// when none is left).
std::string safe_job(const std::string& job);
/// A pidfd for `pid` (readable once the process has exited), or -1 where the kernel has none.
int open_pidfd(int pid);

}  // namespace ddl::comm::transport
