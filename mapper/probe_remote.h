#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mapper/inventory.h"
#include "mapper/probe_hwloc.h"

namespace ddl::mapper {

// Learning the hardware of other hosts: ddlrun's agents (launcher/ssh/agent_tree.h, `ddlrun
// --probe-agent` over ssh) or jsrun bring back what each host's probe printed, read here into an
// Inventory. Each failure becomes one line of reason ("connection refused (10.200.3.2:22)"), and
// all failures are reported together (format_probe_failures), so one run shows every host that
// needs fixing.
//
// When the caller passes a job id (the LSF or Slurm job), inventories are cached on disk in
// <cache_dir>/<job_id>/<host>.yaml, so later ddlrun commands of the same job do not probe again.

/// What a remote command did.
struct RemoteOutput {
  int exit_status = 0;  ///< -1: it ended without one (see signal)
  std::string signal;   ///< the signal that ended it ("KILL"), when the server said
  std::string out;
  std::string err;
};

/// How many hosts are probed at once and where their inventories are cached.
struct HostProbeOptions {
  /// Hosts probed at once (RemoteProber's threads).
  int parallel = 32;
  /// The batch job this run belongs to (LSB_JOBID, SLURM_JOB_ID); empty: no disk cache.
  std::string job_id;
  /// Where the disk cache lives; empty: default_probe_cache_dir().
  std::string cache_dir;
  /// Called as each host's probe ends, answered or failed (a cached host at once), from any of
  /// the probe's threads: ddlrun's progress lines name the hosts it still waits for.
  std::function<void(const std::string& host)> on_settled;
};

/// The inventory that `command` printed on `host`, parsed with inventory_from_yaml(out,
/// "inventory of HOST"). Throws ProbeError with the reason: exit status 127 (ddlrun-probe is not
/// installed at that path there), any other failure (exit status or signal, and the first lines
/// of its stderr), or output that is not an inventory (the InventoryError text).
Inventory inventory_from_probe_output(std::string_view host, std::string_view command,
                                      const RemoteOutput& output);

/// One host's outcome.
struct HostProbe {
  std::string host;
  std::optional<Inventory> inventory;  ///< set when it was probed (or cached)
  std::string error;                   ///< the reason when it was not; may span lines
  bool cached = false;                 ///< read from the run's or the job's cache

  bool ok() const { return inventory.has_value(); }
};

/// Probes one host (jsrun's probe; tests pass fakes); throws ProbeError with the reason.
using HostProbeFn = std::function<Inventory(const std::string& host)>;

/// Probes the hosts of one run with a probe function (jsrun's; a fake, in tests): in parallel
/// (at most options.parallel at once, each on a thread of a pool), each distinct host once however
/// often it is asked for, through the job's disk cache when options.job_id is set.
class RemoteProber {
 public:
  RemoteProber(HostProbeOptions options, HostProbeFn probe_one);

  /// One result per entry of `hosts`, in that order. Never throws for a host that fails.
  /// Successes are written to the disk cache (0600 files in a 0700 directory); a cache that
  /// cannot be read or written is skipped, and an unreadable cache file is probed again.
  std::vector<HostProbe> probe(std::span<const std::string> hosts);

 private:
  HostProbeOptions options_;
  HostProbeFn probe_one_;
  std::mutex mutex_;
  std::map<std::string, Inventory, std::less<>> inventories_;
};

/// All failures as one message, or "" when every host was probed:
///   cannot probe 2 of 18 hosts:
///     node03: connection refused (10.200.3.2:22)
///     node07: timed out after 10 s connecting to 10.200.7.2:22
///   fix them, drop them from the host list, or plan offline with --host-xml HOST=FILE ...
/// A host named more than once counts once. Lines after a reason's first are indented further.
std::string format_probe_failures(std::span<const HostProbe> results);

/// The job's directory in the disk cache, <cache_dir>/<job_id>, made private (0700): "" when
/// options.job_id is empty or the directory cannot be made.
std::string job_cache_dir(const HostProbeOptions& options);

/// The inventory of `host` in the job's disk cache (options.job_id), when it has one that
/// reads; nullopt without a job id.
std::optional<Inventory> cached_inventory(const HostProbeOptions& options, const std::string& host);
/// Writes the inventory of `host` into the job's disk cache; nothing without a job id.
void cache_inventory(const HostProbeOptions& options, const std::string& host,
                     const Inventory& inventory);

/// The text of a cache file: nullopt unless it is a regular file of ours that can be read.
std::optional<std::string> read_cache_file(const std::string& path);

/// Writes a cache file atomically: a 0600 temporary file beside it, then rename. A file that
/// cannot be written is skipped (the cache is only a shortcut).
void write_cache_file(const std::string& path, std::string_view text);

/// Creates `path` and its parents (0700 for those it makes) and checks that the last is a
/// directory of ours that only we can use (making it so when it is ours). False when it cannot.
bool make_private_dir(const std::string& path);

/// ${XDG_CACHE_HOME:-$HOME/.cache}/ddlrun/probe; "" when neither variable is set.
std::string default_probe_cache_dir();

/// Where the disk cache keeps `host` for `job_id`: <cache_dir>/<job_id>/<host>.yaml, with
/// characters other than letters, digits and ._:@+- (and a leading dot) written as %XX.
std::string probe_cache_path(std::string_view cache_dir, std::string_view job_id,
                             std::string_view host);

}  // namespace ddl::mapper
