#include "ddlrun/plan.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "ddlrun/shell_words.h"
#include "hostfiles/rankfile.h"
#include "mapper/racks.h"

namespace ddl::cli {

namespace {

bool valid_variable_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

void merge_into(hostfiles::HostList& into, const hostfiles::HostList& from,
                const std::string& source) {
  for (const hostfiles::Host& h : from.hosts())
    into.add(h, hostfiles::Position{source, 0, 0, {}});
}

/// The hosts of the job and a description of where they came from.
std::pair<hostfiles::HostList, std::string> resolve_hosts(const Options& o, GetEnv getenv_fn,
                                                          void* env_context) {
  if (!o.hosts.empty() && !o.hostfile.empty()) {
    throw UsageError("both -H and --hostfile name hosts; give one of them");
  }
  if (!o.hosts.empty()) {
    hostfiles::HostList list;
    for (const std::string& value : o.hosts)
      merge_into(list, hostfiles::parse_hosts_option(value, "-H"), "-H");
    return {std::move(list), "-H"};
  }
  if (!o.hostfile.empty())
    return {hostfiles::read_hostfile(o.hostfile), "--hostfile " + o.hostfile};
  if (auto allocation = hostfiles::allocation_from_environment(getenv_fn, env_context)) {
    std::string from = allocation->empty() ? "batch job" : allocation->hosts().front().origin;
    from = from.substr(0, from.find(':'));
    return {std::move(*allocation), from};
  }
  hostfiles::HostList list;
  hostfiles::Host self{"localhost", 1, std::nullopt, false, hostfiles::SourceKind::kDefault,
                       "default"};
  list.add(self, hostfiles::Position{"default", 0, 0, {}});
  return {std::move(list), "default (no -H, --hostfile or batch job)"};
}

/// The mode's dimensions when -m gave none: IBM's four fields (ranks per host x hosts per rack x
/// racks per aisle x aisles) when every host runs the same number of ranks, else one ring.
std::pair<comm::Mode, std::string> resolve_dims(const Options& o,
                                                const mapper::SlotPlacement& placement,
                                                comm::Mode mode) {
  std::vector<std::string> used;
  int per_host = 0;
  bool even = true;
  for (const mapper::HostRanks& h : placement.hosts) {
    if (h.count == 0) continue;
    used.push_back(h.host);
    even = even && (per_host == 0 || per_host == h.count);
    per_host = h.count;
  }
  const bool racks_asked = o.nodes || o.racks || o.aisles || !o.topology_conf.empty();
  if (!mode.dims.empty()) {
    if (racks_asked) {
      throw UsageError("-m " + mode.str() +
                       " gives the dimensions itself; drop --nodes, --racks, --aisles and "
                       "--topology-conf, or the dimensions from -m");
    }
    return {std::move(mode), "given with -m"};
  }
  if (!even) {
    if (racks_asked) {
      throw UsageError("racks need the same number of ranks on every host, but this job has " +
                       placement.describe() + "; change -n or the slots");
    }
    return {mode.resolved(placement.ranks), "one ring: hosts run different numbers of ranks"};
  }
  std::optional<int> hosts_per_rack = o.nodes;
  std::string reason = "ranks per host x hosts per rack x racks per aisle x aisles";
  try {
    if (!o.topology_conf.empty()) {
      if (o.nodes) throw UsageError("give --nodes or --topology-conf, not both");
      hosts_per_rack =
          mapper::hosts_per_rack_from(used, mapper::read_slurm_topology(o.topology_conf));
      reason += ", racks from " + o.topology_conf;
    }
    mode.dims = mapper::ring_dims(per_host, static_cast<int>(used.size()), hosts_per_rack, o.racks);
  } catch (const mapper::RackError& e) {
    throw UsageError(e.what());
  }
  if (o.aisles && *o.aisles != mode.dims[3]) {
    throw UsageError(
        "--aisles " + std::to_string(*o.aisles) + " disagrees with the layout, which has " +
        std::to_string(mode.dims[3]) + " (" + std::to_string(used.size()) + " hosts in racks of " +
        std::to_string(mode.dims[1]) + ", " + std::to_string(mode.dims[2]) + " racks per aisle)");
  }
  return {std::move(mode), reason};
}

}  // namespace

JobPlan make_plan(const Options& o, GetEnv getenv_fn, void* env_context) {
  JobPlan plan;
  plan.program = o.program;

  auto [hosts, from] = resolve_hosts(o, getenv_fn, env_context);
  if (!o.rankfile.empty()) {
    // A rankfile places every rank itself; its hosts must be among the listed ones, if any.
    const hostfiles::Rankfile rankfile = hostfiles::read_rankfile(o.rankfile);
    const bool listed = !o.hosts.empty() || !o.hostfile.empty();
    hostfiles::HostList ranked = hostfiles::hosts_of(rankfile, &hosts, o.rankfile);
    if (listed) {
      for (const hostfiles::Host& h : ranked.hosts()) {
        if (hosts.find(h.name) == nullptr) {
          throw UsageError(o.rankfile + ": host '" + h.name + "' is not among the hosts of " +
                           from + "; add it there or change the rankfile");
        }
      }
    }
    if (o.np && *o.np != static_cast<int>(rankfile.entries.size())) {
      throw UsageError("-n " + std::to_string(*o.np) + " disagrees with the " +
                       std::to_string(rankfile.entries.size()) + " ranks of " + o.rankfile +
                       "; drop -n or change the rankfile");
    }
    hosts = std::move(ranked);
    from = "--rankfile " + o.rankfile;
  }
  plan.hosts = std::move(hosts);
  plan.hosts_from = std::move(from);
  plan.placement = mapper::place_by_slots(
      plan.hosts,
      mapper::PlacementRequest{o.rankfile.empty() ? o.accelerators : std::nullopt, o.np});

  plan.mode_given = o.mode.has_value();
  comm::Mode mode = o.mode ? comm::parse_mode(*o.mode) : comm::Mode{};
  comm::check_mode_fits(mode, plan.placement.ranks, plan.placement.describe());
  std::tie(plan.mode, plan.mode_reason) = resolve_dims(o, plan.placement, std::move(mode));
  try {
    plan.nic = mapper::parse_nic_filter(o.nic);
  } catch (const mapper::NicFilterError& e) {
    throw UsageError(e.what());
  }

  const std::vector<std::string> local_names = launcher::local_host_names();
  launcher::Situation situation;
  situation.in_lsf_job = getenv_fn("LSB_JOBID", env_context).has_value();
  situation.in_slurm_job = getenv_fn("SLURM_JOB_ID", env_context).has_value();
  situation.all_hosts_local = std::all_of(
      plan.placement.hosts.begin(), plan.placement.hosts.end(), [&](const mapper::HostRanks& h) {
        return h.count == 0 || launcher::is_local_host(h.host, local_names);
      });
  plan.launcher = launcher::choose(*launcher::kind_from_string(o.launcher), situation);

  for (const std::string& x : o.exports) {
    const size_t eq = x.find('=');
    const std::string name = x.substr(0, eq);
    if (!valid_variable_name(name)) {
      throw UsageError(
          "-x " + x + ": '" + name +
          "' is not a variable name (letters, digits and '_', not starting with a digit)");
    }
    if (eq != std::string::npos) {
      plan.exports.emplace_back(name, x.substr(eq + 1));
    } else if (auto value = getenv_fn(name.c_str(), env_context)) {
      plan.exports.emplace_back(name, *value);
    } else {
      plan.warnings.push_back("-x " + name + ": " + name +
                              " is not set in ddlrun's environment, so it is not exported");
    }
  }
  for (const std::string& words : o.mpiargs) {
    try {
      for (std::string& w : split_shell_words(words))
        plan.mpiargs.push_back(std::move(w));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--mpiarg: ") + e.what());
    }
  }
  if (!plan.mpiargs.empty() && plan.launcher.kind != launcher::Kind::kMpirun) {
    plan.warnings.push_back("--mpiarg is used only by the mpirun launcher; this job uses " +
                            std::string(launcher::to_string(plan.launcher.kind)));
  }
  return plan;
}

}  // namespace ddl::cli
