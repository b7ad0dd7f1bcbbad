#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::launcher {

/// The launcher backends (--launcher). kPmix names ddlrun's own launchers (local, ssh), which
/// always serve PMIx to their ranks when they can; choose() resolves it to one of them.
/// kPrterun is PRRTE's prterun.
enum class Kind { kAuto, kLocal, kSsh, kMpirun, kPmix, kPrterun, kSrun, kJsrun };

/// "auto", "local", "ssh", "mpirun", "pmix", "prterun", "srun", "jsrun".
std::string_view to_string(Kind kind);
/// The inverse of to_string; nullopt for an unknown name.
std::optional<Kind> kind_from_string(std::string_view name);
/// Every name, in the order above.
std::span<const std::string_view> kind_names();

/// What `auto` looks at.
struct Situation {
  bool in_lsf_job = false;    ///< $LSB_JOBID is set
  bool in_slurm_job = false;  ///< $SLURM_JOB_ID is set
  bool all_hosts_local = false;
};

/// A backend and the reason it was chosen, for -v and the dry run.
struct Choice {
  Kind kind = Kind::kLocal;
  std::string reason;
};

/// Resolves `requested`: a named backend is kept, except pmix, which becomes local when every
/// host is this host and ssh otherwise (each with its PMIx server); `auto` picks jsrun inside
/// an LSF job, srun inside a Slurm job, and otherwise what pmix picks.
Choice choose(Kind requested, const Situation& situation);

/// The names this host answers to: "localhost", its host name (full and short), and the
/// addresses of its network interfaces, plus loopback addresses.
std::vector<std::string> local_host_names();

/// True when `host` is one of `names` (ASCII case ignored), or any 127.x.y.z / ::1 address.
bool is_local_host(std::string_view host, std::span<const std::string> names);

}  // namespace ddl::launcher
