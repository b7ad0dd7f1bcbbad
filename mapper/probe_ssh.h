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

struct ssh_session_struct;
struct ssh_channel_struct;

namespace ddl::mapper {

// Learning the hardware of other hosts: ddlrun runs `ddlrun-probe` on each host over ssh (libssh,
// in parallel) and reads its YAML back into an Inventory.
//
// It behaves like `ssh -o BatchMode=yes HOST PROBE`: keys only (ssh-agent, the default identity
// files and IdentityFile from the ssh config), never a password or passphrase prompt; the ssh
// config honoured (HostName, User, Port, IdentityFile, UserKnownHostsFile, ProxyCommand); host
// keys checked strictly against known_hosts, a changed key always fatal. Each failure becomes one
// line of reason ("connection refused (10.200.3.2:22)"), and all failures are reported together
// (format_probe_failures), so one run shows every host that needs fixing.
//
// Results are cached for the run (each distinct host probed once) and, when the caller passes a
// job id (the LSF or Slurm job), on disk in <cache_dir>/<job_id>/<host>.yaml, so later ddlrun
// commands of the same job do not probe again.

class SshSessions;

/// What to do with a host key that known_hosts does not have.
enum class HostKeyPolicy {
  kStrict,     ///< fail that host, naming its key's fingerprint and how to add it (the default)
  kAcceptNew,  ///< add it to known_hosts and go on (StrictHostKeyChecking=accept-new)
};

/// How to reach the hosts and what to run there. A changed host key fails under every policy.
struct SshProbeOptions {
  /// Absolute path of ddlrun-probe, the same on every host (as mpirun assumes): ddlrun passes
  /// the one installed next to itself.
  std::string probe_path;
  /// A shell command line to run instead of probe_path (tests, wrappers); empty: probe_path.
  std::string remote_command;
  /// An ssh config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config (ssh -F).
  std::string ssh_config;
  std::string user;  ///< overrides the config's User; empty: the config's, else the local user
  int port = 0;      ///< overrides the config's Port; 0: the config's, else 22
  /// Overrides the config's UserKnownHostsFile; empty: the config's, else ~/.ssh/known_hosts.
  std::string known_hosts;
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  /// For the TCP connection, and for each later ssh exchange (handshake, login, exit status).
  std::chrono::milliseconds connect_timeout{10'000};
  /// For the remote command to finish.
  std::chrono::milliseconds command_timeout{120'000};
  int max_parallel = 64;  ///< hosts probed at once
  /// The batch job this run belongs to (LSB_JOBID, SLURM_JOB_ID); empty: no disk cache.
  std::string job_id;
  /// Where the disk cache lives; empty: default_probe_cache_dir().
  std::string cache_dir;
  /// Where probe_host_ssh leaves each host's logged-in session once its probe ran, so that the
  /// ssh launcher runs its agent through it instead of logging in again (one login per host);
  /// null: sessions are closed after the probe.
  std::shared_ptr<SshSessions> keep_sessions;
  /// With keep_sessions: a command to run instead of probe_command() that prints the inventory
  /// and a line "...", then goes on as ddlrun's agent on the same channel (`ddlrun
  /// --probe-agent`); the channel is kept open with the session, so that each host pays for
  /// one login and one login shell. Empty: the probe command, and the session alone is kept.
  std::string keep_command;
};

/// The command run on each host: remote_command, else probe_path (shell-quoted when needed).
std::string probe_command(const SshProbeOptions& options);

/// Probes one host: connects (the config's HostName and Port), checks its host key,
/// authenticates with keys, runs probe_command(options) and reads its output with
/// inventory_from_probe_output. Throws ProbeError whose what() is the reason alone, without the
/// host in front: "connection refused (10.200.3.2:22)". Thread-safe; frees every libssh object
/// on every path.
Inventory probe_host_ssh(const std::string& host, const SshProbeOptions& options);

/// Disconnects and frees a libssh session.
struct SshSessionFree {
  void operator()(ssh_session_struct* s) const;
};
/// A connected, logged-in libssh session; used by one thread at a time.
using SshSession = std::unique_ptr<ssh_session_struct, SshSessionFree>;
/// Closes and frees a libssh channel.
struct SshChannelFree {
  void operator()(ssh_channel_struct* c) const;
};
/// An open exec channel of an SshSession (freed before its session).
using SshChannel = std::unique_ptr<ssh_channel_struct, SshChannelFree>;

/// Steps 1-4 of probe_host_ssh: connects to `host` (the config's HostName and Port), checks its
/// host key and logs in with keys. Throws ProbeError with the reason alone ("connection refused
/// (10.200.3.2:22)"). `endpoint`, when given, receives "address:port" for messages. The ssh
/// launcher uses it to run ddlrun's agent.
SshSession open_ssh_session(const std::string& host, const SshProbeOptions& options,
                            std::string* endpoint = nullptr);

/// Logged-in sessions kept for later, by host name as listed: the prober leaves each host's
/// here (SshProbeOptions::keep_sessions) and the ssh launcher takes them. Thread-safe.
/// Destroying it closes what was not taken.
class SshSessions {
 public:
  /// One kept session and the "address:port" it reached, for messages.
  struct Kept {
    SshSession session;
    std::string endpoint;
    /// The channel of keep_command, its agent running (empty when the probe command ran):
    /// and what it sent after the inventory, the start of the agent's first frame.
    SshChannel channel;
    std::string pending;
    std::string command;  ///< what runs on `channel`, for messages
  };
  /// Keeps `session` for `host`, replacing (and closing) one kept before.
  void put(const std::string& host, Kept kept);
  /// The session kept for `host`, removed from here; an empty Kept when there is none.
  Kept take(const std::string& host);
  /// How many are kept.
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Kept, std::less<>> kept_;
};

/// The reason for a call that failed with `err` EMFILE or ENFILE, naming the limit: "too many
/// open files (limit 1024): raise ulimit -n" (ENFILE: "the system's open files are exhausted
/// (fs.file-max): close some, or raise it"); "" for any other error.
std::string descriptor_exhaustion(int err);

/// descriptor_exhaustion() of this process right now: "" unless opening one more file fails
/// with EMFILE or ENFILE. libssh reports a known_hosts it could not open as an unknown key;
/// this tells the two apart.
std::string descriptors_exhausted_now();

/// What a remote command did.
struct RemoteOutput {
  int exit_status = 0;  ///< -1: it ended without one (see signal)
  std::string signal;   ///< the signal that ended it ("KILL"), when the server said
  std::string out;
  std::string err;
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

/// Probes one host; throws ProbeError with the reason. probe_host_ssh by default; tests pass
/// fakes.
using HostProbeFn = std::function<Inventory(const std::string& host)>;

/// Probes the hosts of one run: in parallel (at most max_parallel at once), each distinct host
/// once however often it is asked for, through the job's disk cache when options.job_id is set.
class RemoteProber {
 public:
  explicit RemoteProber(SshProbeOptions options);
  /// The same with another way to probe one host (a fake, in tests).
  RemoteProber(SshProbeOptions options, HostProbeFn probe_one);

  /// One result per entry of `hosts`, in that order. Never throws for a host that fails.
  /// Successes are written to the disk cache (0600 files in a 0700 directory); a cache that
  /// cannot be read or written is skipped, and an unreadable cache file is probed again.
  std::vector<HostProbe> probe(std::span<const std::string> hosts);

 private:
  SshProbeOptions options_;
  HostProbeFn probe_one_;
  std::mutex mutex_;
  std::map<std::string, Inventory, std::less<>> inventories_;
};

/// RemoteProber(options).probe(hosts).
std::vector<HostProbe> probe_hosts_ssh(std::span<const std::string> hosts,
                                       const SshProbeOptions& options);

/// All failures as one message, or "" when every host was probed:
///   cannot probe 2 of 18 hosts:
///     node03: connection refused (10.200.3.2:22)
///     node07: timed out after 10 s connecting to 10.200.7.2:22
///   fix them, drop them from the host list, or plan offline with --host-xml HOST=FILE ...
/// A host named more than once counts once. Lines after a reason's first are indented further.
std::string format_probe_failures(std::span<const HostProbe> results);

/// ${XDG_CACHE_HOME:-$HOME/.cache}/ddlrun/probe; "" when neither variable is set.
std::string default_probe_cache_dir();

/// Where the disk cache keeps `host` for `job_id`: <cache_dir>/<job_id>/<host>.yaml, with
/// characters other than letters, digits and ._:@+- (and a leading dot) written as %XX.
std::string probe_cache_path(std::string_view cache_dir, std::string_view job_id,
                             std::string_view host);

}  // namespace ddl::mapper
