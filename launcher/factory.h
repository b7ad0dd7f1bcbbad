#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launcher/backend.h"
#include "launcher/job.h"
#include "ssh/session.h"

namespace ddl::launcher {

// The one factory of each backend. ddlrun includes this header only; each backend's folder
// holds its implementation (local/, ssh/, mpirun/, srun/, prterun/; jsrun lives in lsf/). The
// local and ssh backends serve PMIx through pmix_server/.

/// What the backends that start ranks through another program (mpirun, srun, prterun, jsrun)
/// and the ssh backend need besides the job.
struct LaunchOptions {
  /// Absolute path of ddlrun, the same on every host: the ssh backend runs `ddlrun --agent`
  /// there, and the external launchers run `ddlrun --rank-exec -- program...` as each rank.
  std::string ddlrun_path;
  /// How to reach other hosts over ssh (ssh config, user, port, known hosts, connect timeout).
  ddl::ssh::Options ssh;
  std::vector<std::string> mpiargs;  ///< --mpiarg words, passed to mpirun as they are
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

/// Forks and execs every rank on this host: its own process group, its CPU set, its
/// environment (rank_environment), stdin /dev/null except rank 0's.
std::unique_ptr<Backend> make_local_backend(const Job& job, const LaunchOptions& options);

/// Connects to every host over ssh (libssh, in parallel), runs `ddlrun --agent` there, sends it
/// the job, and relays its ranks' output and exit statuses. An agent kills its ranks when the
/// connection to ddlrun drops.
std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options);
/// The same, logging in through `connector` (a fake, in tests), which outlives the backend.
std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options,
                                          ddl::ssh::Connector& connector);

/// `ddlrun --agent`: the per-host side of the ssh backend, speaking the agent protocol
/// (ssh/protocol.h) on `in_fd` and `out_fd`. Never returns: exits with 0 when its ranks ran
/// (their statuses went up the channel), else non-zero.
[[noreturn]] void run_agent(int in_fd, int out_fd);

/// Runs Open MPI's mpirun with a rankfile written from the plan (mpirun/).
std::unique_ptr<Backend> make_mpirun_backend(const Job& job, const LaunchOptions& options);

/// Runs `srun --mpi=pmix` inside a Slurm allocation (srun/).
std::unique_ptr<Backend> make_srun_backend(const Job& job, const LaunchOptions& options);

/// Runs PRRTE's prterun (prterun/); LaunchError naming the package to install when it is
/// missing.
std::unique_ptr<Backend> make_prterun_backend(const Job& job, const LaunchOptions& options);

/// Runs one launcher program (`argv`, with `env` added to options.environ) as the job's single
/// process (rank -1, called `name` in messages): the base of the mpirun, srun, prterun and
/// jsrun backends. Its output is passed through as it comes; its exit status is the job's.
std::unique_ptr<Backend> make_command_backend(std::string name, std::vector<std::string> argv,
                                              std::vector<EnvVar> env,
                                              const LaunchOptions& options);

}  // namespace ddl::launcher
