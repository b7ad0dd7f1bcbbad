#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/backend.h"
#include "launcher/choose.h"
#include "launcher/job.h"
#include "mapper/probe_ssh.h"

namespace ddl::launcher {

// What every backend's factory takes, and the row of ddlrun's table of backends. Each
// backend's folder holds `<name>.h/.cc`, whose header declares its one factory (local/,
// ssh/, mpirun/, srun/, prterun/; jsrun lives in lsf/); only ddlrun's table includes them.
// The local and ssh backends serve PMIx through pmix_server/; the external launchers
// (mpirun, srun, prterun, jsrun) share external_launcher.h.

/// What the backends that start ranks through another program (mpirun, srun, prterun, jsrun)
/// and the ssh backend need besides the job.
struct LaunchOptions {
  /// Absolute path of ddlrun, the same on every host: the ssh backend runs `ddlrun --agent`
  /// there, and the external launchers run `ddlrun --rank-exec -- program...` as each rank.
  std::string ddlrun_path;
  /// How to reach other hosts over ssh (ssh config, user, port, known hosts, connect timeout).
  mapper::SshProbeOptions ssh;
  std::vector<std::string> mpiargs;  ///< --mpiarg words, passed to mpirun and prterun as they are
  std::string jsrun_mode = "erf";    ///< --jsrun-mode: erf or rs (the jsrun backend, lsf/)
  std::string smpiargs;              ///< --smpiargs: passed to jsrun; empty: not passed
  /// The plan's inventories by host name (none for hosts not probed): the jsrun backend counts
  /// CPUs the way jsrun does from them.
  std::map<std::string, mapper::Inventory> inventories;
  /// A private directory (0700) for files the launch needs (rankfile, topology copy); the
  /// backend may write there and ddlrun removes it after the job.
  std::string work_dir;
  /// The environment ddlrun runs in, "NAME=value" each (what external launchers inherit).
  std::vector<std::string> environ;
  int verbosity = 0;
  /// The port of ddlrun's rendezvous server (comm::RendezvousServer) for the local and ssh
  /// backends; 0: none (the ranks bootstrap through PMIx or are alone).
  int rendezvous_port = 0;
  /// The local and ssh backends serve PMIx to their ranks (pmix_server/): ddlrun or each
  /// agent runs a PMIx server, and every rank is its client.
  bool pmix_server = true;
  /// The ssh backend: how long ddlrun and each agent wait without hearing from the other
  /// (heartbeats every second) before the host, or ddlrun, counts as lost
  /// (--heartbeat-timeout).
  std::chrono::milliseconds heartbeat_timeout{10000};
};

struct ExternalCommand;  // external_launcher.h
class ExternalLauncher;  // external_launcher.h

/// A backend's row in ddlrun's table of backends (ddlrun/backends.cc), one per --launcher
/// name that starts ranks (every Kind but auto and pmix, which choose() resolves). Its
/// folder's header declares the one factory it holds: make_local_backend in local/local.h,
/// make_mpirun_launcher in mpirun/mpirun.h.
struct BackendEntry {
  Kind kind;
  /// ddlrun's own launchers (local, ssh): the backend for a job; nullptr for the others.
  std::unique_ptr<Backend> (*make_backend)(const Job& job, const LaunchOptions& options);
  /// The external launchers (mpirun, srun, prterun, jsrun): what make_external_backend runs;
  /// nullptr for ddlrun's own. May throw LaunchError (an option it cannot use).
  std::unique_ptr<ExternalLauncher> (*make_launcher)(const LaunchOptions& options);

  /// The backend for `job`; throws LaunchError when it cannot start it here.
  std::unique_ptr<Backend> make(const Job& job, const LaunchOptions& options) const;
  /// What the backend would run, for the dry run (preview_external); LaunchError for
  /// ddlrun's own launchers, which run no other program.
  ExternalCommand preview(const Job& job, const LaunchOptions& options) const;
};

}  // namespace ddl::launcher
