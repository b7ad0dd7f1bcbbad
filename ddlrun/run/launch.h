#pragma once

#include <memory>
#include <string>

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"

namespace spdlog {
class logger;
}

namespace ddl::ddlrun {

struct NodePart;

/// The launcher's view of `plan`: topology, program, -x exports, a fresh token, each rank's
/// core count from its host's inventory, and `topology_path` as where ranks read the plan.
launcher::Job make_job(const JobPlan& plan, const std::string& topology_path);

/// The directory holding the Python package `ddl` of the ddlrun at `ddlrun_path`, for its ranks
/// (Job::python_dir): where `cmake --install` puts it relative to the installed ddlrun
/// (DDL_PYTHON_FROM_BINDIR, set by python/CMakeLists.txt), else the build tree's python/ beside
/// ddlrun's own folder; "" when neither holds ddl/__init__.py (the package was not built).
std::string python_package_dir(const std::string& ddlrun_path);

/// The address ddlrun's rendezvous server for the ranks listens on: the one the ranks are told
/// where ddlrun knows it before the job starts (the local launcher's loopback address), else
/// "" (every address): an ssh agent tells its ranks the address its host's sshd saw ddlrun
/// come from (SSH_CONNECTION), which differs between hosts on different networks, an external
/// launcher's ranks get ddlrun's host name, and per-node mode's --rdzv HOST may be a name.
std::string rank_rendezvous_bind(const launcher::BackendDescriptor& backend, bool per_node);

/// The --tag-output value as a style ("auto", "rank", "mpi", "none").
launcher::TagStyle tag_style(const std::string& name);

/// Starts the planned job with the chosen backend and supervises it until it ends: writes the
/// topology file (to --topology-file, else into a private temporary directory removed
/// afterwards), builds the backend, and returns supervise()'s exit status (and, in `end` when
/// given, how the job ended). Throws launcher::LaunchError when the job cannot start. With
/// `node` (per-node mode, per_node.h) only this node's ranks start, and the status is the job's
/// on every node.
int launch(const JobPlan& plan, const Options& options, spdlog::logger& log,
           launcher::JobEnd* end = nullptr, const NodePart* node = nullptr);

}  // namespace ddl::ddlrun
