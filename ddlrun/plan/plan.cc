#include "ddlrun/plan/plan.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "base/text.h"
#include "ddlrun/backends.h"
#include "ddlrun/plan/agents.h"
#include "ddlrun/plan/probe_progress.h"
#include "ddlrun/shell_words.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

namespace {

/// How often a probe that goes on says which hosts it still waits for (ProbeProgress).
constexpr std::chrono::milliseconds kProbeProgressEvery{5000};

bool valid_variable_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

/// The environment make_plan reads: the process's, or a test's.
struct Env {
  GetEnv get;
  void* context;

  std::optional<std::string> operator()(const char* name) const { return get(name, context); }
};

/// Where the job runs: inside an LSF or a Slurm job, or neither.
launcher::Situation batch_situation(const Env& env) {
  launcher::Situation situation;
  situation.in_lsf_job = env("LSB_JOBID").has_value();
  situation.in_slurm_job = env("SLURM_JOB_ID").has_value();
  return situation;
}

void merge_into(hostfiles::HostList& into, const hostfiles::HostList& from,
                const std::string& source) {
  for (const hostfiles::Host& h : from.hosts())
    into.add(h, hostfiles::Position{source, 0, 0, {}});
}

/// The hosts of the job and a description of where they came from.
std::pair<hostfiles::HostList, std::string> resolve_hosts(const Options& o, const Env& env) {
  if (!o.hosts.empty() && !o.hostfile.empty()) {
    throw UsageError("both -H and --hostfile name hosts; give one of them");
  }
  if (!o.hosts.empty()) {
    hostfiles::HostList list;
    for (const std::string& value : o.hosts)
      merge_into(list, hostfiles::parse_hosts_option(value, o.hosts_from), o.hosts_from);
    return {std::move(list), o.hosts_from};
  }
  if (!o.hostfile.empty())
    return {hostfiles::read_hostfile(o.hostfile), "--hostfile " + o.hostfile};
  if (auto allocation = hostfiles::allocation_from_environment(env.get, env.context)) {
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

/// Reads --rankfile, when given: it places every rank itself, and its hosts replace `hosts`
/// (and `from`); when hosts were listed (-H, --hostfile), each of its hosts must be among them.
/// "+n2" entries name the third host of `hosts`.
std::optional<hostfiles::Rankfile> apply_rankfile(const Options& o, hostfiles::HostList& hosts,
                                                  std::string& from) {
  if (o.rankfile.empty()) return std::nullopt;
  hostfiles::Rankfile rankfile = hostfiles::read_rankfile(o.rankfile);
  const bool listed = !o.hosts.empty() || !o.hostfile.empty();
  hostfiles::HostList ranked = hostfiles::hosts_of(rankfile, &hosts, o.rankfile);
  for (hostfiles::RankfileEntry& e : rankfile.entries) {
    if (e.relative_node) e.host = hosts.hosts()[static_cast<size_t>(*e.relative_node)].name;
  }
  if (listed) {
    for (const hostfiles::Host& h : ranked.hosts()) {
      if (hosts.find(h.name) == nullptr) {
        throw UsageError(o.rankfile + ": host '" + h.name + "' is not among the hosts of " + from +
                         "; add it there or change the rankfile");
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
  return rankfile;
}

mapper::NicFilter nic_filter(const Options& o) {
  try {
    return mapper::parse_nic_filter(o.nic);
  } catch (const mapper::NicFilterError& e) {
    throw UsageError(e.what());
  }
}

/// Sockets whose GPUs share no NVLink: reduce inside each socket first, then across them. The
/// first dimension (ranks per host) becomes GPUs per socket x sockets.
void add_socket_dimension(comm::Mode& mode, int per_host, int per_socket, std::string& reason) {
  mode.dims[0] = per_socket;
  mode.dims.insert(mode.dims.begin() + 1, per_host / per_socket);
  reason =
      "GPUs per socket x sockets x hosts per rack x racks per aisle x aisles: no NVLink "
      "between sockets" +
      reason.substr(reason.find(" x aisles") + 9);
}

/// Throws when --aisles disagrees with the aisles of the layout `mode` gives `hosts` hosts.
void check_aisles(const Options& o, const comm::Mode& mode, size_t hosts) {
  const size_t off = mode.dims.size() - 4;  // 1 with the socket dimension
  if (o.aisles && *o.aisles != mode.dims[3 + off]) {
    throw UsageError("--aisles " + std::to_string(*o.aisles) +
                     " disagrees with the layout, which has " + std::to_string(mode.dims[3 + off]) +
                     " (" + std::to_string(hosts) + " hosts in racks of " +
                     std::to_string(mode.dims[1 + off]) + ", " +
                     std::to_string(mode.dims[2 + off]) + " racks per aisle)");
  }
}

/// Hosts per rack: --nodes, the racks of --topology-conf, or the racks --probe-links found
/// (when it found more than one); nullopt: one rack. Adds where they came from to `reason`.
std::optional<int> racks_of(const Options& o, const std::vector<std::string>& used,
                            const std::optional<comm::LinkMeasurement>& links,
                            std::string& reason) {
  if (!o.topology_conf.empty()) {
    if (o.nodes) throw UsageError("give --nodes or --topology-conf, not both");
    reason += ", racks from " + o.topology_conf;
    return mapper::hosts_per_rack_from(used, mapper::read_slurm_topology(o.topology_conf));
  }
  if (!o.nodes && links && links->racks.size() > 1) {
    reason += ", racks measured (--probe-links)";
    return static_cast<int>(links->racks.front().size());
  }
  return o.nodes;
}

/// The mode's dimensions when -m gave none: IBM's four fields (ranks per host x hosts per rack x
/// racks per aisle x aisles) when every host runs the same number of ranks, else one ring.
std::pair<comm::Mode, std::string> resolve_dims(const Options& o,
                                                const mapper::SlotPlacement& placement,
                                                comm::Mode mode, std::optional<int> per_socket,
                                                const std::optional<comm::LinkMeasurement>& links) {
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
  std::string reason = "ranks per host x hosts per rack x racks per aisle x aisles";
  try {
    const std::optional<int> hosts_per_rack = racks_of(o, used, links, reason);
    mode.dims = mapper::ring_dims(per_host, static_cast<int>(used.size()), hosts_per_rack, o.racks);
  } catch (const mapper::RackError& e) {
    throw UsageError(e.what());
  }
  if (per_socket && per_host % *per_socket == 0) {
    add_socket_dimension(mode, per_host, *per_socket, reason);
  }
  check_aisles(o, mode, used.size());
  return {std::move(mode), reason};
}

/// How the hosts that are neither this host nor given by --host-xml are probed, and the name
/// the plan gives that way ("ssh", "jsrun").
struct RemoteProber {
  RemoteProbe probe;  ///< empty: over ssh
  std::string name;
};

/// `remote` when given (tests). Inside an LSF job whose ranks jsrun starts, jsrun also reaches
/// the compute hosts to probe them, where ssh may be refused (Summit); else ssh.
RemoteProber remote_prober(const Options& o, const Env& env, const std::string& job_id,
                           const RemoteProbe& remote) {
  if (remote || !env("LSB_JOBID") || (o.launcher != "auto" && o.launcher != "jsrun")) {
    return {remote, "ssh"};
  }
  // The probe cache the ssh probe keeps too.
  return {launcher_probe(backend_named("jsrun"), ssh_probe_options(o, job_id).job_id), "jsrun"};
}

/// Whether the ssh launcher follows the probe: hosts probed over ssh are remote, so it does
/// unless a batch system's launcher (or --launcher) says otherwise.
bool ssh_launcher_follows(const Options& o, const Env& env) {
  return choose_backend(o.launcher, batch_situation(env)).backend->keeps_probe_sessions;
}

/// The --host-xml file for `host`: an exact name beats a pattern; among several, the last wins.
const std::string* xml_for(const std::vector<std::pair<std::string, std::string>>& host_xml,
                           const std::string& host) {
  const std::string* exact = nullptr;
  const std::string* pattern = nullptr;
  for (const auto& [pat, file] : host_xml) {
    if (pat == host) {
      exact = &file;
    } else if (::fnmatch(pat.c_str(), host.c_str(), 0) == 0) {
      pattern = &file;
    }
  }
  return exact ? exact : pattern;
}

/// The hardware --host-xml describes in `file`, read once for all the hosts that use it.
std::shared_ptr<const mapper::Inventory> xml_inventory(
    std::map<std::string, std::shared_ptr<const mapper::Inventory>>& by_file,
    const std::string& file) {
  auto it = by_file.find(file);
  if (it != by_file.end()) return it->second;
  mapper::ProbeOptions po;
  po.xml_path = file;
  try {
    return by_file.emplace(file, std::make_shared<const mapper::Inventory>(mapper::probe_hwloc(po)))
        .first->second;
  } catch (const mapper::ProbeError& e) {
    throw UsageError("--host-xml " + file + ": " + e.what());
  }
}

/// Fills in the hardware known without reaching another host: from --host-xml, and this
/// host's hwloc (probed once) for the hosts named in `local_names`. Returns the other hosts.
std::vector<std::string> hardware_known_here(const Options& o, JobPlan& plan,
                                             const std::vector<std::string>& local_names,
                                             const KnownHardware* known) {
  std::vector<std::pair<std::string, std::string>> host_xml;
  for (const std::string& x : o.host_xml) {
    const size_t eq = x.find('=');
    host_xml.emplace_back(x.substr(0, eq), x.substr(eq + 1));
  }
  std::map<std::string, std::shared_ptr<const mapper::Inventory>> by_file;
  std::shared_ptr<const mapper::Inventory> self;
  std::vector<std::string> remote_hosts;
  for (const hostfiles::Host& h : plan.hosts.hosts()) {
    const auto given = known != nullptr ? known->find(h.name) : KnownHardware::const_iterator{};
    if (const std::string* file = xml_for(host_xml, h.name)) {
      plan.inventories[h.name] = xml_inventory(by_file, *file);
      plan.hardware_from[h.name] = *file;
    } else if (known != nullptr && given != known->end()) {
      plan.inventories[h.name] = std::make_shared<const mapper::Inventory>(given->second);
      plan.hardware_from[h.name] = "rendezvous";
    } else if (launcher::is_local_host(h.name, local_names)) {
      if (!self) {
        self = std::make_shared<const mapper::Inventory>(
            mapper::probe_hwloc(mapper::this_host_cached()));
      }
      plan.inventories[h.name] = self;
      plan.hardware_from[h.name] = "this host";
    } else {
      remote_hosts.push_back(h.name);
    }
  }
  return remote_hosts;
}

/// What ddlrun runs on each host for its agent (launcher/ssh/agent.h), named so in the hosts'
/// process lists while it probes.
std::string agent_command() {
  return quote_shell_word(self_path()) + " --probe-agent";
}

/// Probes `hosts` with the prober, or over ssh through ddlrun's agents (agents.h), each
/// first-level host's session kept in plan.agents, hearing ddlrun's heartbeat until the launch
/// takes it over or the plan closes it (close_unused_agents). `fresh` passes by the job's disk
/// cache, so that every host is reached (a restart's check that it still answers). When the ssh
/// launcher follows, beyond --tree-width hosts the agents carry the probe down the launch tree
/// (for a dry run too); else the first level is every host.
std::vector<mapper::HostProbe> probe_remote_hosts(const Options& o, JobPlan& plan,
                                                  const RemoteProber& prober,
                                                  const std::vector<std::string>& hosts,
                                                  bool ssh_follows, bool fresh) {
  if (prober.probe) return prober.probe(hosts);
  launcher::startup_step("probing " + std::to_string(hosts.size()) +
                         (hosts.size() == 1 ? " host" : " hosts") +
                         " over ssh (--no-probe or --host-xml skip it)");
  SshProbeOptions so = ssh_probe_options(o, plan.job_id);
  if (fresh) so.job_id.clear();
  ProbeProgress progress(hosts, kProbeProgressEvery, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  });
  so.on_settled = [&progress](const std::string& host) { progress.settled(host); };
  plan.agents = std::make_shared<launcher::ssh::AgentTree>();
  launcher::ssh::keep_agents_alive(*plan.agents);
  std::vector<std::string> all;
  for (const hostfiles::Host& h : plan.hosts.hosts())
    all.push_back(h.name);
  return probe_through_tree(o, all, hosts, so, agent_command(), ssh_follows ? o.tree_width : 0,
                            *plan.agents);
}

/// Closes the agents' sessions when nothing will use them: after a dry run's probe, or when
/// another launcher than ddlrun's ssh launcher follows; with --probe-links, once it measured
/// (measure_links). Every agent then exits: nothing is left on any host.
void close_unused_agents(JobPlan& plan, bool dry_run, bool ssh_follows) {
  if (!dry_run && ssh_follows) return;
  plan.agents.reset();
}

/// The test hook DDLRUN_TEST_PLAN_DELAY_MS=N (tests/netns/tree_test.sh): planning takes N ms
/// longer after the probe, as it may at thousands of hosts, and says so on stderr, so that a
/// test can act in that gap (kill ddlrun) while the probed hosts' agents wait for their job.
void test_plan_delay(const Env& env) {
  const std::optional<std::string> ms = env("DDLRUN_TEST_PLAN_DELAY_MS");
  if (!ms || ms->empty()) return;
  const long n = std::strtol(ms->c_str(), nullptr, 10);
  std::fprintf(stderr, "ddlrun: DDLRUN_TEST_PLAN_DELAY_MS: planning %ld ms longer\n", n);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::clamp(n, 0L, 3'600'000L)));
}

/// plan.hosts without the hosts in `without`.
void leave_out(JobPlan& plan, const std::set<std::string>& without) {
  if (without.empty()) return;
  hostfiles::HostList kept;
  for (const hostfiles::Host& h : plan.hosts.hosts()) {
    if (!without.contains(h.name)) kept.add(h, hostfiles::Position{plan.hosts_from, 0, 0, {}});
  }
  plan.hosts = std::move(kept);
}

/// With `drop`, the hosts whose probe failed leave the plan (plan.unreachable says why) and
/// the others' results are returned; else every result.
std::vector<mapper::HostProbe> drop_failed_probes(JobPlan& plan,
                                                  std::vector<mapper::HostProbe> results,
                                                  bool drop) {
  if (!drop) return results;
  std::set<std::string> failed;
  std::vector<mapper::HostProbe> ok;
  for (mapper::HostProbe& r : results) {
    if (r.ok()) {
      ok.push_back(std::move(r));
    } else if (failed.insert(r.host).second) {
      plan.unreachable.emplace_back(r.host, r.error);
    }
  }
  leave_out(plan, failed);
  return ok;
}

/// Records the probed hosts' hardware; throws ProbeError listing every host that failed.
void record_probes(JobPlan& plan, const std::vector<mapper::HostProbe>& results,
                   const std::string& prober_name) {
  std::string failures = mapper::format_probe_failures(results);
  if (const size_t ssh =
          failures.find("(each must pass 'ssh -o BatchMode=yes HOST true', printing nothing)");
      ssh != std::string::npos && prober_name == "jsrun") {
    failures.replace(ssh, failures.find(')', ssh) + 1 - ssh,
                     "(jsrun must run 'ddlrun --probe' on each; try 'jsrun -n 1 hostname')");
  }
  if (!failures.empty()) throw mapper::ProbeError(failures);
  for (const mapper::HostProbe& r : results) {
    plan.inventories[r.host] = std::make_shared<const mapper::Inventory>(*r.inventory);
    plan.hardware_from[r.host] = r.cached ? prober_name + " (cached)" : prober_name;
  }
}

/// Each host's hardware: from --host-xml, this host's hwloc (hosts named in `local_names`), or
/// the prober. Fills plan.inventories and plan.hardware_from; throws ProbeError listing every
/// host that failed, or with `drop_unreachable` leaves those out (plan.unreachable), each host
/// probed past the job's disk cache.
void gather_hardware(const Options& o, JobPlan& plan, const RemoteProber& prober,
                     const std::vector<std::string>& local_names, bool ssh_follows,
                     bool drop_unreachable, const KnownHardware* known) {
  if (o.no_probe) return;  // no entry: "not probed"
  const std::vector<std::string> remote_hosts = hardware_known_here(o, plan, local_names, known);
  if (remote_hosts.empty()) return;
  record_probes(
      plan,
      drop_failed_probes(
          plan, probe_remote_hosts(o, plan, prober, remote_hosts, ssh_follows, drop_unreachable),
          drop_unreachable),
      prober.name);
}

/// Refuses a machine listed under two names (machine.h): by the identity its probes found, else
/// by being this host or the same address. Throws mapper::PlacementError naming both.
void check_distinct_machines(const JobPlan& plan, const std::vector<std::string>& local_names) {
  std::vector<mapper::NamedHost> named;
  named.reserve(plan.hosts.size());
  for (const hostfiles::Host& h : plan.hosts.hosts()) {
    mapper::NamedHost n{h.name, h.origin, {}, launcher::is_local_host(h.name, local_names)};
    if (auto it = plan.inventories.find(h.name); it != plan.inventories.end())
      n.identity = it->second->identity;
    named.push_back(std::move(n));
  }
  mapper::check_distinct_machines(named);
}

}  // namespace

std::string job_id_of(const Options& o, GetEnv getenv_fn, void* env_context) {
  const Env env{getenv_fn, env_context};
  if (!o.job_id.empty()) return o.job_id;
  for (const char* name : {"LSB_JOBID", "SLURM_JOB_ID"}) {
    if (auto v = env(name); v && !v->empty()) return *v;
  }
  return "ddlrun-" + std::to_string(::getpid());
}

namespace {

/// Places every rank on the hardware found (plan.placed: GPU, CPUs and NIC), by `rankfile`
/// when given; the mapper's notes become warnings.
void place_ranks(const Options& o, const hostfiles::Rankfile* rankfile, const Replan& replan,
                 JobPlan& plan) {
  mapper::PlaceRequest request;
  request.ranks_per_host = o.rankfile.empty() ? o.accelerators : std::nullopt;
  request.total_ranks = o.np;
  if (o.np && replan.first_hosts > 0) {
    const int64_t scaled =
        int64_t{*o.np} * static_cast<int64_t>(plan.hosts.size()) / replan.first_hosts;
    request.total_ranks = std::max<int>(1, static_cast<int>(std::min<int64_t>(scaled, *o.np)));
  }
  request.tcp = o.tcp;
  request.nic = plan.nic;
  if (rankfile) {
    request.rankfile = rankfile;
    request.rankfile_path = o.rankfile;
  }
  std::map<std::string, const mapper::Inventory*> inventories;
  for (const auto& [name, inv] : plan.inventories)
    inventories[name] = inv.get();
  plan.placed = mapper::place(plan.hosts, inventories, request);
  plan.placement = plan.placed.slots();
  for (const std::string& note : plan.placed.notes)
    plan.warnings.push_back(note);
}

/// The hosts with ranks, as --probe-links measures them: at their first rank's address (the
/// NIC chosen for it), else the host's (for this host: as the others see it).
std::vector<mapper::LinkHost> link_hosts(const JobPlan& plan,
                                         const std::vector<std::string>& local_names) {
  std::vector<mapper::LinkHost> hosts;
  for (const comm::Host& h : plan.placed.topology_hosts) {
    const bool local = launcher::is_local_host(h.name, local_names);
    hosts.push_back({h.name, local ? std::string() : h.address, local});
  }
  for (const comm::RankPlacement& r : plan.placed.ranks) {
    mapper::LinkHost& h = hosts[static_cast<size_t>(r.host)];
    if (r.local_rank == 0 && !r.address.empty()) h.address = r.address;
  }
  return hosts;
}

/// Measures `hosts`' links with `lo` through the agents in plan.agents along their tree
/// (launcher/ssh/tree_links.h; their sessions go back before this returns), after logging in
/// to each host they do not reach (reach_hosts).
mapper::LinkMeasurement measure_through_agents(const Options& o, JobPlan& plan,
                                               const std::vector<mapper::LinkHost>& hosts,
                                               mapper::LinkProbeOptions lo) {
  const std::map<std::string, std::string> unreached =
      reach_hosts(hosts, ssh_probe_options(o, plan.job_id), agent_command(), *plan.agents);
  launcher::ssh::TreeLinks tree(
      *plan.agents, std::chrono::milliseconds(static_cast<int64_t>(o.heartbeat_timeout * 1000)));
  lo.open = link_channels(tree, unreached);
  return mapper::probe_links(hosts, lo, plan.warnings);
}

/// --probe-links' measurement of `hosts`: through the agents the probe left along the launch
/// tree, flat or deeper, and agents started for it on the hosts they do not reach, which join
/// the tree (the launch takes them over; close_unused_agents closes them when none follows).
mapper::LinkMeasurement measure_through_probe(const Options& o, JobPlan& plan,
                                              const std::vector<mapper::LinkHost>& hosts) {
  mapper::LinkProbeOptions lo;
  lo.answer_timeout = ssh_probe_options(o, plan.job_id).connect_timeout;
  lo.agent_port = o.probe_links_port;
  if (!plan.agents) {
    plan.agents = std::make_shared<launcher::ssh::AgentTree>();
    launcher::ssh::keep_agents_alive(*plan.agents);
  }
  return measure_through_agents(o, plan, hosts, lo);
}

/// --probe-links' measurement into plan.links (measure_links): the batch job's cache, else
/// measure_through_probe.
void measure_links_now(const Options& o, JobPlan& plan,
                       const std::vector<std::string>& local_names) {
  const std::vector<mapper::LinkHost> hosts = link_hosts(plan, local_names);
  const std::string job_dir = mapper::job_cache_dir(ssh_probe_options(o, plan.job_id));
  const std::string cache = job_dir.empty() ? "" : job_dir + "/links.cache";
  try {
    if (!cache.empty()) plan.links = mapper::read_links_cache(cache, hosts);
    plan.links_cached = plan.links.has_value();
    if (!plan.links) plan.links = measure_through_probe(o, plan, hosts);
    if (!cache.empty() && !plan.links_cached) mapper::write_links_cache(cache, hosts, *plan.links);
  } catch (const mapper::LinkError& e) {
    plan.warnings.push_back(std::string("--probe-links: ") + e.what() +
                            "; planned without measured links");
  }
}

/// --probe-links: measures the links between the hosts with ranks into plan.links
/// (measure_links_now); in a batch job, once per job (the probe cache's links.cache, for the
/// same hosts at the same addresses). A measurement that cannot be made is a warning, and the
/// plan goes on without it.
void measure_links(const Options& o, JobPlan& plan, const std::vector<std::string>& local_names) {
  if (!o.probe_links) return;
  if (plan.placed.topology_hosts.size() >= 2) measure_links_now(o, plan, local_names);
}

/// Hosts per rack and racks per aisle in the layout's dimensions (IBM's four fields, after
/// the socket dimension when there is one); one rack of every host for a single ring.
std::pair<int, int> layout_racks(const comm::Mode& levels, int hosts) {
  if (levels.dims.size() < 4) return {hosts, 1};
  const size_t off = levels.dims.size() - 4;
  return {levels.dims[1 + off], levels.dims[2 + off]};
}

/// The cost model's prediction of every mode worth comparing (mapper/cost.h) at 1, 16 and 256
/// MiB and at --predict-bytes; `levels` are the layout's own dimensions. Links measured by
/// --probe-links set the host and rack levels; --link settings still win.
mapper::Prediction predict(const Options& o, const JobPlan& plan, const comm::Mode& levels) {
  std::vector<mapper::LinkSetting> links;
  double pick_bytes = 0;
  try {
    for (const std::string& l : o.links)
      links.push_back(mapper::parse_link(l));
    pick_bytes = mapper::parse_size(o.predict_bytes, "--predict-bytes");
  } catch (const mapper::CostError& e) {
    throw UsageError(e.what());
  }
  const auto [hosts_per_rack, racks_per_aisle] =
      layout_racks(levels, static_cast<int>(plan.placed.topology_hosts.size()));
  const mapper::Layout layout = mapper::make_layout(plan.placed, hosts_per_rack, racks_per_aisle);
  std::vector<comm::Mode> modes = mapper::candidate_modes(levels);
  if (std::find(modes.begin(), modes.end(), plan.mode) == modes.end()) {
    modes.insert(modes.begin(), plan.mode);
  }
  constexpr double kMiB = 1 << 20;
  const std::vector<mapper::FabricLevel> measured =
      plan.links ? mapper::measured_levels(plan.links->levels) : std::vector<mapper::FabricLevel>();
  return mapper::predict_modes(mapper::make_fabric(plan.placed, layout, links, measured), layout,
                               std::move(modes), {kMiB, 16 * kMiB, 256 * kMiB}, pick_bytes);
}

/// Refuses a --mode whose dimensions fit this plan's ranks only when --max-restarts may start
/// the job again on fewer hosts (--min-hosts, --nnodes MIN:MAX): said at the start, not at the
/// first failure.
void check_mode_for_restarts(const Options& o, const comm::Mode& mode, const JobPlan& plan) {
  const int hosts = static_cast<int>(plan.hosts.size());
  const std::optional<int> min = o.nnodes ? std::optional<int>(o.nnodes->min) : o.min_hosts;
  if (o.max_restarts == 0 || mode.dims.empty() || !min || *min >= hosts) return;
  throw UsageError("--mode " + mode.str() + " fits " + std::to_string(mode.ranks()) +
                   " ranks only, but with --max-restarts the job may start again on fewer hosts (" +
                   std::string(o.nnodes ? "--nnodes " : "--min-hosts ") + std::to_string(*min) +
                   " of its " + std::to_string(hosts) +
                   "); leave --mode out, so that ddlrun picks a mode for each attempt");
}

/// The mode (-m, its dimensions resolved for the placement; with --mode auto, or when nothing
/// names the mode or the racks, the fastest the cost model predicts) and the rings it makes.
void resolve_mode(const Options& o, JobPlan& plan) {
  const bool auto_named = o.mode && base::trim(*o.mode) == "auto";
  const bool racks_named = o.nodes || o.racks || o.aisles || !o.topology_conf.empty();
  plan.mode_given = o.mode.has_value() && !auto_named;
  plan.mode_auto = auto_named || (!o.mode && !racks_named);
  comm::Mode mode = plan.mode_given ? comm::parse_mode(*o.mode) : comm::Mode{};
  comm::check_mode_fits(mode, plan.placement.ranks, plan.placement.describe());
  check_mode_for_restarts(o, mode, plan);
  const std::optional<int> per_socket = mapper::socket_ring_size(plan.placed);
  std::tie(plan.mode, plan.mode_reason) =
      resolve_dims(o, plan.placement, mode, per_socket, plan.links);
  const comm::Mode levels =
      mode.dims.empty()
          ? comm::Mode{comm::Algorithm::kExplore, plan.mode.dims}
          : resolve_dims(o, plan.placement, comm::Mode{}, per_socket, plan.links).first;
  plan.prediction = predict(o, plan, levels);
  const comm::Mode& fastest = plan.prediction.modes[plan.prediction.fastest].mode;
  if (plan.mode_auto && fastest != plan.mode) {
    plan.mode = fastest;
    plan.mode_reason = "--mode auto: the fastest predicted, see prediction";
  }
  plan.topology = mapper::take_topology(plan.placed, plan.mode, plan.job_id);
  plan.topology.links = plan.links;
}

/// The launcher, from --launcher, the batch system and whether every host with ranks is this
/// one. The ssh probe's sessions are closed unless the ssh launcher uses them.
void choose_launcher(const Options& o, const Env& env, const std::vector<std::string>& local_names,
                     JobPlan& plan) {
  launcher::Situation situation = batch_situation(env);
  situation.all_hosts_local = std::all_of(
      plan.placement.hosts.begin(), plan.placement.hosts.end(), [&](const mapper::HostRanks& h) {
        return h.count == 0 || launcher::is_local_host(h.host, local_names);
      });
  plan.launcher = choose_backend(o.launcher, situation);
  if (!chosen_backend(plan).keeps_probe_sessions) plan.agents.reset();  // closes them
}

/// Whether ddlrun sets `name` itself for each rank (launcher/job.cc), so that -x cannot.
bool rank_variable(const std::string& name) {
  static const std::set<std::string> kSet = {
      "DDL_RANK",      "DDL_SIZE",  "DDL_LOCAL_RANK", "DDL_LOCAL_SIZE", "DDL_HOST_INDEX",
      "DDL_NUM_HOSTS", "RANK",      "LOCAL_RANK",     "WORLD_SIZE",     "LOCAL_WORLD_SIZE",
      "GROUP_RANK",    "ROLE_RANK", "ROLE_WORLD_SIZE"};
  return kSet.contains(name);
}

/// The -x variables with their values: given, or from ddlrun's environment (a warning when
/// unset there).
void resolve_exports(const Options& o, const Env& env, JobPlan& plan) {
  // The ranks' sitecustomize (python/ddl/_site) puts libddl's horovod ahead of sys.path.
  if (o.horovod == "ddl") plan.exports.emplace_back("DDL_HOROVOD", "ddl");
  for (const std::string& x : o.exports) {
    const size_t eq = x.find('=');
    const std::string name = x.substr(0, eq);
    if (!valid_variable_name(name)) {
      throw UsageError(
          "-x " + x + ": '" + name +
          "' is not a variable name (letters, digits and '_', not starting with a digit)");
    }
    if (rank_variable(name)) {
      throw UsageError("-x " + x + ": ddlrun sets " + name +
                       " itself, for each rank (where it is in the job); leave it out, and "
                       "change the job's shape with -n, -H or -a instead");
    }
    if (eq != std::string::npos) {
      plan.exports.emplace_back(name, x.substr(eq + 1));
    } else if (auto value = env(name.c_str())) {
      plan.exports.emplace_back(name, *value);
    } else {
      plan.warnings.push_back("-x " + name + ": " + name +
                              " is not set in ddlrun's environment, so it is not exported");
    }
  }
}

/// Each --mpiarg split into words as a shell would.
void split_mpiargs(const Options& o, JobPlan& plan) {
  for (const std::string& words : o.mpiargs) {
    try {
      for (std::string& w : split_shell_words(words))
        plan.mpiargs.push_back(std::move(w));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--mpiarg: ") + e.what());
    }
  }
}

/// --wdir made absolute; a warning when the launcher does not use it.
void resolve_wdir(const Options& o, JobPlan& plan) {
  if (o.wdir.empty()) return;
  std::error_code ec;
  plan.wdir = std::filesystem::absolute(o.wdir, ec).lexically_normal().string();
  if (plan.wdir.size() > 1 && plan.wdir.back() == '/') plan.wdir.pop_back();
  if (!chosen_backend(plan).own()) {
    plan.warnings.push_back("--wdir is used by the local and ssh launchers only; this job uses " +
                            std::string(chosen_backend(plan).name) +
                            ", whose ranks start where it puts them");
  }
}

void warn_unused_mpiargs(JobPlan& plan) {
  if (!plan.mpiargs.empty() && !chosen_backend(plan).takes_mpiarg) {
    plan.warnings.push_back("--mpiarg is used only by the mpirun launcher; this job uses " +
                            std::string(chosen_backend(plan).name));
  }
}

}  // namespace

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("ddlrun");
}

SshProbeOptions ssh_probe_options(const Options& o, const std::string& job_id) {
  SshProbeOptions s;
  s.ssh_config = o.ssh_config;
  if (o.connect_timeout) {
    s.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(*o.connect_timeout * 1000));
  }
  // Only a batch job's id names a cache that later ddlrun commands of the job can share.
  if (job_id.rfind("ddlrun-", 0) != 0) s.job_id = job_id;
  return s;
}

// How it works: first the hosts (-H, --hostfile, the batch allocation or this host, replaced
// by a rankfile's), then each host's hardware (--host-xml, this host's hwloc, a probe over ssh
// or jsrun). The mapper places the ranks on that hardware; the mode's dimensions follow from
// the placement, the launcher from the batch system and where the ranks run. Last come what
// every rank starts with: the exports, mpirun's arguments and the working directory.
JobPlan make_plan(const Options& o, GetEnv getenv_fn, void* env_context, const RemoteProbe& remote,
                  const Replan& replan, const KnownHardware* known) {
  const Env env{getenv_fn, env_context};
  JobPlan plan;
  plan.program = o.program;
  auto [hosts, from] = resolve_hosts(o, env);
  const std::optional<hostfiles::Rankfile> rankfile = apply_rankfile(o, hosts, from);
  plan.hosts = std::move(hosts);
  plan.hosts_from = std::move(from);
  leave_out(plan, replan.without);
  plan.job_id = job_id_of(o, getenv_fn, env_context);
  plan.nic = nic_filter(o);
  // This host's names and addresses, read once: which hosts to probe here, and the launcher.
  const std::vector<std::string> local_names = launcher::local_host_names();
  const RemoteProber prober = remote_prober(o, env, plan.job_id, remote);
  const bool ssh_follows = ssh_launcher_follows(o, env);
  gather_hardware(o, plan, prober, local_names, ssh_follows, replan.drop_unreachable, known);
  if (!o.probe_links) close_unused_agents(plan, o.dry_run, ssh_follows);
  launcher::startup_step("planning the job");
  test_plan_delay(env);
  check_distinct_machines(plan, local_names);
  place_ranks(o, rankfile ? &*rankfile : nullptr, replan, plan);
  measure_links(o, plan, local_names);
  close_unused_agents(plan, o.dry_run, ssh_follows);
  resolve_mode(o, plan);
  choose_launcher(o, env, local_names, plan);
  resolve_exports(o, env, plan);
  split_mpiargs(o, plan);
  resolve_wdir(o, plan);
  warn_unused_mpiargs(plan);
  return plan;
}

}  // namespace ddl::ddlrun
