#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::launcher {

/// What `auto` looks at.
struct Situation {
  bool in_lsf_job = false;    ///< $LSB_JOBID is set
  bool in_slurm_job = false;  ///< $SLURM_JOB_ID is set
  bool all_hosts_local = false;
};

struct BackendDescriptor;  // descriptor.h

/// A backend and the reason it was chosen, for -v and the dry run.
struct Choice {
  const BackendDescriptor* backend = nullptr;
  std::string reason;
};

/// The names this host answers to: "localhost", its host name (full and short), and the
/// addresses of its network interfaces, plus loopback addresses.
std::vector<std::string> local_host_names();

/// True when `host` is one of `names` (ASCII case ignored), or any 127.x.y.z / ::1 address.
bool is_local_host(std::string_view host, std::span<const std::string> names);

}  // namespace ddl::launcher
