// The jsrun backend: the job as one jsrun launch inside an LSF job (Summit and its kin).
//
// How it works. jsrun starts tasks in resource sets on the compute nodes of the LSF job. The
// default form is an explicit resource file (ERF): erf_text() writes one line per rank with
// its host (by name) and its CPUs exactly as the plan placed them, so jsrun binds each rank
// and numbers it as ddlrun did. CPUs are written in jsrun's logical indexing (the position of
// a hardware thread among the host's usable ones, which skips the cores LSF keeps for the
// system) when every host's inventory is known, else as OS numbers with
// `cpu_index_using: physical`. GPUs are the exception: jsrun renumbers a set's GPUs from 0 for
// its tasks, while libddl and $DDL_GPU use the host's numbering, so each rank's set holds its
// host's GPUs from 0 to the highest its host uses, and $DDL_GPU picks its own, as under every
// other launcher. Because ERF broke on Summit after its RHEL 8 upgrade, the resource-set form
// is offered too: one set per host holding the whole host, unbound inside it; each rank
// (`ddlrun --rank-exec`, which reads $JSM_NAMESPACE_RANK) binds itself to its planned CPUs.
// In both forms the job-wide variables (external.h) sit in jsrun's environment and are named
// with `-E NAME`, so no value (the job token above all) appears on a command line, and the
// topology travels in $DDL_TOPOLOGY_TEXT, since ddlrun runs on the launch node, where no rank
// runs.

#include "lsf/jsrun.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/check.h"
#include "hostfiles/hostfiles.h"

namespace ddl::lsf {

using launcher::LaunchError;

namespace {

std::string host_name(const launcher::Job& job, int index) {
  return launcher::host_name_of(job.topology, index);
}

/// jsrun fills resource sets host by host in the LSF job's order: the plan's hosts, in their
/// rank order, must be the first compute hosts of $LSB_MCPU_HOSTS in that order.
void check_host_order(const launcher::Job& job, const std::vector<int>& order,
                      const std::vector<std::string>& environ) {
  const std::optional<std::string> mcpu = launcher::environ_value(environ, "LSB_MCPU_HOSTS");
  if (!mcpu) return;
  std::vector<std::string> lsf;
  try {
    const hostfiles::HostList list = hostfiles::parse_lsf_mcpu_hosts(*mcpu);
    for (const hostfiles::Host& h : list.hosts())
      lsf.push_back(h.name);
  } catch (const hostfiles::InputError&) {
    return;  // ddlrun read its hosts elsewhere (-H); the message below would mislead
  }
  std::string planned, expected;
  bool same = order.size() <= lsf.size();
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string name = host_name(job, order[i]);
    planned += (i ? " " : "") + name;
    if (i < lsf.size()) expected += (i ? " " : "") + lsf[i];
    same = same && i < lsf.size() && lsf[i] == name;
  }
  if (!same) {
    throw LaunchError("jsrun launcher: resource sets fill the LSF job's hosts in its order (" +
                      expected + "), but the plan's hosts are " + planned +
                      "; use --jsrun-mode erf, or drop -H/--hostfile");
  }
}

/// What the ERF's preamble has to allow. Each host's GPUs as its ranks number them: 0 to the
/// highest one they use (see jsrun.h). Unbound ranks (an oversubscribed plan) share all of
/// their host's threads, and a host's ranks share its GPUs: the preamble has to allow that,
/// or jsrun refuses the file.
struct ErfSharing {
  bool unbound = false;        ///< some rank has no CPU set
  std::map<int, int> top_gpu;  ///< by host index: the highest GPU its ranks use
  bool shared_gpus = false;    ///< some host's resource sets share GPUs
};

ErfSharing erf_sharing(const launcher::Job& job) {
  ErfSharing s;
  std::map<int, int> gpu_ranks;
  for (const comm::RankPlacement& r : job.topology.ranks) {
    s.unbound = s.unbound || r.cpus.empty();
    if (r.gpu < 0) continue;
    s.top_gpu[r.host] = std::max(s.top_gpu[r.host], r.gpu);
    ++gpu_ranks[r.host];
  }
  for (const auto& [host, n] : gpu_ranks)
    s.shared_gpus = s.shared_gpus || n > 1 || s.top_gpu[host] > 0;
  return s;
}

/// Rank `r`'s CPUs as its ERF line gives them: its CPU set (all of its host's usable threads
/// when it has none), as positions among the host's usable threads when `logical`.
comm::CpuSet erf_rank_cpus(const comm::RankPlacement& r, const std::string& host,
                           const JsrunOptions& options, bool logical) {
  comm::CpuSet cpus = r.cpus;
  if (cpus.empty()) {
    auto it = options.usable_pus.find(host);
    if (it == options.usable_pus.end()) {
      throw LaunchError("jsrun launcher: rank " + std::to_string(r.rank) + " on " + host +
                        " has no CPU set and the host's hardware is unknown (--no-probe), but "
                        "every line of an ERF needs CPUs; let ddlrun probe the hosts, give "
                        "--host-xml, or use --jsrun-mode rs");
    }
    cpus = comm::CpuSet::of(it->second);
  }
  if (!logical) return cpus;
  const std::vector<int>& usable = options.usable_pus.at(host);
  comm::CpuSet mapped;
  for (int pu : cpus.pus()) {
    auto it = std::lower_bound(usable.begin(), usable.end(), pu);
    if (it == usable.end() || *it != pu) {
      throw LaunchError("jsrun launcher: rank " + std::to_string(r.rank) + " is planned on CPU " +
                        std::to_string(pu) + " of " + host +
                        ", which is not among the host's usable hardware threads; "
                        "check the host's hardware (--host-xml) or use --jsrun-mode rs");
    }
    mapped.add(static_cast<int>(it - usable.begin()));
  }
  return mapped;
}

/// The resource-set form's flags: one set per host, hosts in the plan's order, each a block of
/// consecutive ranks; LaunchError when the plan does not fit that form.
std::vector<std::string> resource_set_flags(const launcher::Job& job,
                                            const std::vector<std::string>& environ) {
  std::vector<int> order;  // host indices in the order their blocks start
  std::map<int, int> count;
  int previous = -1;
  for (const comm::RankPlacement* r : launcher::ranks_in_order(job.topology)) {
    if (r->host != previous) {
      if (count.count(r->host) != 0) {
        throw LaunchError("jsrun launcher: the plan puts non-consecutive ranks on " +
                          host_name(job, r->host) + " (rank " + std::to_string(r->rank) +
                          "), which resource sets cannot express; use --jsrun-mode erf");
      }
      order.push_back(r->host);
      previous = r->host;
    }
    ++count[r->host];
  }
  DDL_CHECK(!order.empty(), "jsrun launcher: the plan has no ranks");
  const int per_host = count[order.front()];
  check_host_order(job, order, environ);
  for (int h : order) {
    if (count[h] != per_host) {
      throw LaunchError(
          "jsrun launcher: resource sets need the same number of ranks on every host, but " +
          host_name(job, order.front()) + " has " + std::to_string(per_host) + " and " +
          host_name(job, h) + " has " + std::to_string(count[h]) +
          "; use --jsrun-mode erf, or -np/--accelerators for an even plan");
    }
  }
  // Each set is its whole host, unbound: each rank binds itself to its planned CPUs (a set of
  // N cores would be the host's first N, not necessarily the planned ones) and sees every
  // GPU, $DDL_GPU naming its own, as under ddlrun's other launchers.
  return {"-n", std::to_string(order.size()),
          "-r", "1",
          "-a", std::to_string(per_host),
          "-c", "ALL_CPUS",
          "-g", "ALL_GPUS",
          "-b", "none",
          "-d", "packed"};
}

/// The variables jsrun forwards (`-E NAME`): env.names, then LSB_JOBID and LSB_MCPU_HOSTS
/// when ddlrun's environment has them.
std::vector<std::string> forwarded_names(const launcher::JobEnvironment& env,
                                         const std::vector<std::string>& environ) {
  std::vector<std::string> names = env.names;
  for (const char* n : {"LSB_JOBID", "LSB_MCPU_HOSTS"}) {
    if (launcher::environ_value(environ, n) &&
        std::find(names.begin(), names.end(), n) == names.end()) {
      names.emplace_back(n);
    }
  }
  return names;
}

}  // namespace

JsrunMode parse_jsrun_mode(const std::string& text) {
  if (text == "erf") return JsrunMode::kErf;
  if (text == "rs") return JsrunMode::kResourceSets;
  throw LaunchError("unknown jsrun mode '" + text +
                    "'; use --jsrun-mode erf (an explicit resource file) or --jsrun-mode rs "
                    "(resource sets)");
}

std::map<std::string, std::vector<int>> usable_pus(
    const std::map<std::string, std::shared_ptr<const mapper::Inventory>>& inventories) {
  std::map<std::string, std::vector<int>> out;
  for (const auto& [name, inventory] : inventories) {
    std::vector<int>& pus = out[name];
    for (const mapper::Package& p : inventory->packages) {
      const std::vector<int> more = p.pus();
      pus.insert(pus.end(), more.begin(), more.end());
    }
    std::sort(pus.begin(), pus.end());
    pus.erase(std::unique(pus.begin(), pus.end()), pus.end());
  }
  return out;
}

std::string erf_text(const launcher::Job& job, const JsrunOptions& options) {
  bool logical = !job.topology.hosts.empty();
  for (const comm::Host& h : job.topology.hosts)
    logical = logical && options.usable_pus.count(h.name) != 0;
  const ErfSharing sharing = erf_sharing(job);
  std::string out = "cpu_index_using: " + std::string(logical ? "logical" : "physical") + "\n";
  if (sharing.unbound || sharing.shared_gpus) out += "overlapping_rs: allow\n";
  if (sharing.unbound) out += "oversubscribe_cpu: allow\n";
  for (const comm::RankPlacement* r : launcher::ranks_in_order(job.topology)) {
    const std::string host = host_name(job, r->host);
    std::string fields =
        "hostname: " + host + "; cpu: {" + erf_rank_cpus(*r, host, options, logical).str() + "}";
    if (auto g = sharing.top_gpu.find(r->host); g != sharing.top_gpu.end()) {
      fields +=
          "; gpu: {" + std::string(g->second > 0 ? "0-" : "") + std::to_string(g->second) + "}";
    }
    out += "rank: " + std::to_string(r->rank) + ": { " + fields + " } : app 0\n";
  }
  return out;
}

launcher::JobEnvironment jsrun_environment(const launcher::Job& job,
                                           const launcher::Rendezvous& rendezvous,
                                           const launcher::LaunchOptions& options) {
  launcher::JobEnvironment env = launcher::job_environment(job, rendezvous, options.environ);
  const bool private_file =
      !options.work_dir.empty() && job.topology_path.rfind(options.work_dir + "/", 0) == 0;
  if (!private_file) return env;  // the user's file, on a shared file system
  const std::string text = comm::format_topology(job.topology);
  if (text.size() > launcher::kInlineTopologyMax) {
    throw LaunchError("jsrun launcher: the plan's topology (" + std::to_string(text.size()) +
                      " bytes) is too large to hand to the ranks in their environment, and only "
                      "this node has ddlrun's copy; put it on a shared file system with "
                      "--topology-file FILE (Summit: under $MEMBERWORK)");
  }
  const std::string name(launcher::kTopologyTextVariable);
  for (const launcher::EnvVar& e : env.set) {
    if (e.first == name) return env;
  }
  // job_environment inlines it only for several hosts; here none of them is this one.
  env.set.emplace_back(name, text);
  env.names.insert(env.names.begin() + static_cast<ptrdiff_t>(env.set.size()) - 1, name);
  return env;
}

launcher::ExternalCommand jsrun_command(const launcher::Job& job,
                                        const launcher::LaunchOptions& options,
                                        const launcher::JobEnvironment& env,
                                        const std::string& erf_path, const JsrunOptions& jsrun) {
  launcher::ExternalCommand c;
  std::vector<std::string>& a = c.argv;
  a.push_back("jsrun");
  if (jsrun.mode == JsrunMode::kErf) {
    c.work_file = {erf_path, erf_text(job, jsrun)};
    a.insert(a.end(), {"--erf_input", erf_path});
  } else {
    const std::vector<std::string> flags = resource_set_flags(job, options.environ);
    a.insert(a.end(), flags.begin(), flags.end());
  }
  if (!jsrun.smpiargs.empty()) a.insert(a.end(), {"--smpiargs", jsrun.smpiargs});
  for (const std::string& n : forwarded_names(env, options.environ))
    a.insert(a.end(), {"-E", n});
  for (const std::string& w : launcher::rank_exec_command(options.ddlrun_path, job.argv))
    a.push_back(w);
  c.env = env.set;
  return c;
}

void check_allocation(const std::vector<std::string>& environ) {
  const std::optional<std::string> id = launcher::environ_value(environ, "LSB_JOBID");
  if (!id || id->empty()) {
    throw LaunchError(
        "jsrun launcher: not inside an LSF job ($LSB_JOBID is not set); run ddlrun inside a "
        "bsub script or `bsub -Is`, or use --launcher ssh or --launcher mpirun");
  }
}

namespace {

constexpr std::string_view kModeOption = "--jsrun-mode";
constexpr std::string_view kSmpiargsOption = "--smpiargs";
constexpr std::string_view kModes[] = {"erf", "rs"};
constexpr launcher::BackendOption kOptions[] = {
    {.name = kModeOption,
     .value_name = "erf|rs",
     .help = "How the jsrun launcher describes the job: erf (a resource file, default) or rs "
             "(resource sets, for sites where ERF is broken)",
     .default_value = "erf",
     .choices = kModes},
    {.name = kSmpiargsOption,
     .value_name = "ARGS",
     .help = "Passed to jsrun as --smpiargs ARGS (e.g. \"-gpu\")"},
};

constexpr launcher::ExternalLauncher::Names kNames = {
    "jsrun",
    "jsrun launcher: jsrun is not on $PATH; load the site's jsrun (Summit: it is in "
    "/opt/ibm/jsm/bin), or use --launcher ssh or --launcher mpirun",
    "ddlrun.erf", "ERF"};

class Launcher : public launcher::ExternalLauncher {
 public:
  explicit Launcher(const launcher::LaunchOptions& options) : ExternalLauncher(kNames) {
    jsrun_.mode = parse_jsrun_mode(kJsrunBackend.setting(options.settings, kModeOption));
    jsrun_.smpiargs = kJsrunBackend.setting(options.settings, kSmpiargsOption);
    jsrun_.usable_pus = options.host_pus;
  }

  void check_site(const launcher::Job&, const launcher::LaunchOptions& options) override {
    check_allocation(options.environ);
  }
  launcher::JobEnvironment environment(const launcher::Job& job,
                                       const launcher::Rendezvous& rendezvous,
                                       const launcher::LaunchOptions& options) const override {
    return jsrun_environment(job, rendezvous, options);
  }
  launcher::ExternalCommand command(const launcher::Job& job,
                                    const launcher::LaunchOptions& options,
                                    const launcher::JobEnvironment& env,
                                    const std::string& work_file_path) const override {
    return jsrun_command(job, options, env, work_file_path, jsrun_);
  }

 private:
  JsrunOptions jsrun_;
};

}  // namespace

std::unique_ptr<launcher::ExternalLauncher> make_jsrun_launcher(
    const launcher::LaunchOptions& options) {
  return std::make_unique<Launcher>(options);
}

const launcher::BackendDescriptor kJsrunBackend{
    .name = "jsrun",
    .auto_rank = 0,
    .automatic = [](const launcher::Situation& s) { return s.in_lsf_job; },
    .why = "inside an LSF job ($LSB_JOBID is set)",
    .make_launcher = make_jsrun_launcher,
    .options = kOptions};

}  // namespace ddl::lsf
