#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/backend.h"
#include "launcher/job.h"
#include "launcher/pmix_server/fence.h"

namespace ddl::launcher::pmix_server {

// A PMIx server inside ddlrun (local launcher) or inside each `ddlrun --agent` (ssh launcher),
// so that the ranks it starts are PMIx clients: PMIx_Init tells each who it is, and
// Put/Commit/Fence/Get carry their wire-up, as under PRRTE, Slurm or jsrun. Open MPI programs
// start under it without mpirun.
//
// How it works: Server::start() runs PMIx_server_init with a module of upcalls; register_job()
// registers the job's namespace ("ddlrun.<job id>") with what PMIx clients and Open MPI read
// (job and universe size, node and process maps, local peers, local size and leader, app number,
// job id, and per rank its local, node and app rank, node id and host name) and every rank of
// this host as a client. fork_environment() is PMIx_server_setup_fork: the PMIX_* variables a
// rank needs to reach this server, merged into its environment before exec. The PMIx library
// collects the fence of this host's ranks by itself; once all of them are in, the fence_nb
// upcall hands the host's contribution to the Host, which joins it with the other hosts'
// (FenceCombiner in ddlrun) and calls back with the combined blob. The same goes for
// direct modex (a Get of a rank on another host whose data was not collected): the Host
// fetches it from the rank's own server (local_modex() there). Upcalls arrive on PMIx's
// progress thread; the Host must not block in them.

/// Called back once with a PMIx status (0: success) and data.
using DataDone = std::function<void(int status, std::string data)>;

/// What the launcher does for the server's upcalls (on PMIx's thread; never block).
class Host {
 public:
  virtual ~Host() = default;
  /// Every rank of this host taking part in a fence has entered it; `done` with the
  /// combined data of every host once all have (or with an error status).
  virtual void fence(Contribution contribution, DataDone done) = 0;
  /// Rank `rank` called PMIx_Abort(status, message): the job must end with `status`.
  virtual void abort(int rank, int status, const std::string& message) = 0;
  /// The data rank `rank` (on another host) committed, for a Get here.
  virtual void direct_modex(int rank, DataDone done) = 0;
};

/// What the supervisor is told when rank `rank` calls PMIx_Abort(status, message): a line on
/// its stderr ("PMIx_Abort(status 7): message") and its exit with `status` (1 when 0), so
/// that the fail-fast path ends the job with that status.
std::vector<Event> abort_events(int rank, int status, const std::string& message);

/// Appends `pmix` (Server::fork_environment) to a rank's variables `env`, except those the
/// user set: with -x (`exports`), or OMPI_MCA_* in the environment the rank inherits (`base`,
/// "NAME=value" each).
void add_environment(std::vector<EnvVar>& env, std::vector<EnvVar> pmix,
                     const std::vector<EnvVar>& exports, const std::vector<std::string>& base);

/// A rank's PMIx state as this server saw it (for messages).
enum class ClientState { kNotConnected, kConnected, kFinalized };

/// The PMIx server of this process, serving one job at a time. Destroying it deregisters the
/// job; PMIx itself stays initialized until the process ends (PMIx 4.2 cannot start a server
/// twice in one process).
class Server {
 public:
  /// Starts the PMIx server (the first time in this process) with its files in `tmpdir`
  /// (private, existing, lasting as long as the process; empty: a directory of its own,
  /// removed at exit). Throws LaunchError naming the PMIx error when it cannot start.
  static std::unique_ptr<Server> start(const std::string& tmpdir, Host& host);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Registers `job`'s namespace as seen from this host, which holds the ranks of the hosts
  /// `host_indices` (one for an agent; every host for the local launcher), and those ranks as
  /// clients. Once per server. Throws LaunchError.
  void register_job(const Job& job, const std::vector<int>& host_indices);
  /// The variables rank `rank` needs to be this server's client (PMIx_server_setup_fork):
  /// PMIX_NAMESPACE, PMIX_RANK, PMIX_SERVER_URI*, ..., and OMPI_MCA_schizo=^orte (so that an
  /// Open MPI 4.1 program uses this server instead of starting as a singleton). Throws
  /// LaunchError.
  std::vector<EnvVar> fork_environment(int rank);
  /// The data rank `rank` of this host committed (PMIx_server_dmodex_request), for another
  /// host's direct modex; `done` runs on PMIx's thread.
  void local_modex(int rank, DataDone done);

  struct Impl;

 private:
  Server() = default;
  std::shared_ptr<Impl> impl_;
  std::string nspace_;
};

}  // namespace ddl::launcher::pmix_server
