// Probing an LSF job's compute hosts through jsrun (see probe_jsrun.h).
//
// How it works. jsrun places resource sets host by host; with one set per host (-r 1) holding
// the whole host (-c ALL_CPUS -g ALL_GPUS, unbound, so hwloc sees every thread and GPU) and one
// task per set, a step of N sets runs `ddlrun --probe` once on each of the job's N compute
// hosts. `--stdio_mode prepended` puts "RANK: " before every line of a task's output, so the N
// inventories come apart again; each names the host it ran on, which is how it is matched to
// the host list (jsrun's rank order is not relied on).

#include "lsf/probe_jsrun.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>

#include "base/subprocess.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::lsf {

namespace {

std::string short_name(std::string_view name) {
  return std::string(name.substr(0, name.find('.')));
}

/// The first `n` lines of `text`, indented, for a message.
std::string first_lines(std::string_view text, int n) {
  std::string out;
  size_t pos = 0;
  for (int i = 0; i < n && pos < text.size(); ++i) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    out += "\n  " + std::string(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

/// Runs the jsrun step in a process group of its own (killed as one after `timeout`): what it
/// printed and how it ended, as mapper::RemoteOutput says it (127 when it could not start,
/// -1 with the signal's name when one ended it or the timeout passed).
mapper::RemoteOutput spawn_and_read(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& environ,
                                    std::chrono::milliseconds timeout) {
  base::CaptureOptions options;
  options.environ = environ;
  options.timeout = timeout;
  options.own_group = true;
  base::Captured c = base::run_capture(argv, options);
  mapper::RemoteOutput result;
  result.out = std::move(c.out);
  result.err = std::move(c.err);
  if (c.spawn_error != 0) {
    result.exit_status = 127;
    result.err = std::strerror(c.spawn_error);
  } else if (c.timed_out) {
    result.exit_status = -1;
    result.signal = "KILL";
    result.err += "\n(timed out after " + std::to_string(timeout.count() / 1000) + " s)";
  } else if (c.signal != 0) {
    result.exit_status = -1;
    result.signal = strsignal(c.signal);
  } else {
    result.exit_status = c.exit_status;
  }
  return result;
}

/// The LSF job's compute hosts, or why jsrun cannot probe any of them.
struct ComputeHosts {
  std::vector<std::string> hosts;
  std::string why_not;  ///< empty when `hosts` are the job's
};

ComputeHosts compute_hosts(const std::vector<std::string>& environ) {
  ComputeHosts out;
  struct Env {
    const std::vector<std::string>* environ;
  } env{&environ};
  try {
    const std::optional<hostfiles::HostList> allocation = hostfiles::allocation_from_environment(
        [](const char* name, void* context) {
          return launcher::environ_value(*static_cast<Env*>(context)->environ, name);
        },
        &env);
    if (!allocation || !launcher::environ_value(environ, "LSB_JOBID")) {
      out.why_not = "not inside an LSF job, so jsrun cannot probe it";
    } else {
      for (const hostfiles::Host& h : allocation->hosts())
        out.hosts.push_back(h.name);
    }
  } catch (const hostfiles::InputError& e) {
    out.why_not = std::string("cannot read the LSF job's hosts: ") + e.what();
  }
  return out;
}

/// One jsrun step that probes every host of `compute`: a result for each.
std::vector<mapper::HostProbe> run_probe_step(const std::vector<std::string>& compute,
                                              const JsrunProbeOptions& options) {
  std::string path = "jsrun";  // a fake RunCommand gets it unresolved
  if (!options.run) {
    path = launcher::find_in_path(
        "jsrun", launcher::environ_value(options.environ, "PATH").value_or("/usr/bin:/bin"));
  }
  if (path.empty()) {
    std::vector<mapper::HostProbe> results;
    for (const std::string& h : compute) {
      results.push_back(
          {h, std::nullopt, "jsrun is not on $PATH, so it cannot probe the host", false});
    }
    return results;
  }
  std::vector<std::string> argv =
      jsrun_probe_command(options.ddlrun_path, compute.size(), options.environ);
  const std::string command = launcher::shell_join(argv);
  argv[0] = path;
  const mapper::RemoteOutput output = options.run
                                          ? options.run(argv, options.environ)
                                          : spawn_and_read(argv, options.environ, options.timeout);
  return parse_jsrun_probe(compute, command, output);
}

}  // namespace

std::vector<std::string> jsrun_probe_command(const std::string& ddlrun_path, size_t hosts,
                                             const std::vector<std::string>& environ) {
  std::vector<std::string> argv = {"jsrun", "-n", std::to_string(hosts), "-r", "1", "-a", "1"};
  argv.insert(argv.end(), {"-c", "ALL_CPUS", "-g", "ALL_GPUS", "-b", "none"});
  argv.insert(argv.end(), {"--stdio_mode", "prepended", "-E", "PATH"});
  if (launcher::environ_value(environ, "LD_LIBRARY_PATH")) {
    argv.insert(argv.end(), {"-E", "LD_LIBRARY_PATH"});
  }
  argv.insert(argv.end(), {ddlrun_path, "--probe"});
  return argv;
}

std::vector<mapper::HostProbe> parse_jsrun_probe(const std::vector<std::string>& hosts,
                                                 std::string_view command,
                                                 const mapper::RemoteOutput& output) {
  std::vector<mapper::HostProbe> results;
  for (const std::string& h : hosts)
    results.push_back(mapper::HostProbe{h, std::nullopt, {}, false});
  const std::string cmd(command);
  if (output.exit_status != 0) {
    const std::string why = output.exit_status < 0
                                ? "ended by signal " + output.signal
                                : "exited with status " + std::to_string(output.exit_status);
    for (mapper::HostProbe& r : results)
      r.error = "jsrun probe '" + cmd + "' " + why + first_lines(output.err, 4);
    return results;
  }
  // Each task's lines, by rank.
  std::map<int, std::string> text;
  std::string_view rest = output.out;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const size_t colon = line.find(": ");
    int rank = -1;
    if (colon != std::string_view::npos) {
      auto [ptr, ec] = std::from_chars(line.data(), line.data() + colon, rank);
      if (ec != std::errc() || ptr != line.data() + colon) rank = -1;
    }
    if (rank < 0) continue;  // jsrun's own words
    text[rank] += std::string(line.substr(colon + 2)) + "\n";
  }
  std::map<std::string, mapper::Inventory> by_name;
  std::string bad;
  for (const auto& [rank, yaml] : text) {
    try {
      mapper::Inventory inv =
          mapper::inventory_from_yaml(yaml, "probe task " + std::to_string(rank));
      by_name.emplace(short_name(inv.hostname), std::move(inv));
    } catch (const mapper::InventoryError& e) {
      bad += "; task " + std::to_string(rank) + ": " + e.what();
    }
  }
  std::string ran;
  for (const auto& [name, inv] : by_name)
    ran += (ran.empty() ? "" : " ") + name;
  for (mapper::HostProbe& r : results) {
    auto it = by_name.find(short_name(r.host));
    if (it != by_name.end()) {
      r.inventory = it->second;
    } else {
      r.error = "no probe task of '" + cmd +
                "' reported this host (tasks reported: " + (ran.empty() ? "none" : ran) + ")" + bad;
    }
  }
  return results;
}

std::vector<mapper::HostProbe> probe_hosts_jsrun(const std::vector<std::string>& hosts,
                                                 const JsrunProbeOptions& options) {
  const ComputeHosts compute = compute_hosts(options.environ);
  // One jsrun step for every host that is not cached, run by whichever host asks first.
  std::once_flag once;
  std::map<std::string, mapper::HostProbe> by_host;
  mapper::HostProbeOptions cache;
  cache.job_id = options.job_id;
  cache.cache_dir = options.cache_dir;
  mapper::RemoteProber prober(cache, [&](const std::string& host) -> mapper::Inventory {
    if (!compute.why_not.empty()) throw mapper::ProbeError(compute.why_not);
    if (std::find(compute.hosts.begin(), compute.hosts.end(), host) == compute.hosts.end()) {
      throw mapper::ProbeError("not a compute host of this LSF job, so jsrun cannot reach it");
    }
    std::call_once(once, [&] {
      for (mapper::HostProbe& r : run_probe_step(compute.hosts, options))
        by_host.emplace(r.host, std::move(r));
    });
    const mapper::HostProbe& r = by_host.at(host);
    if (!r.ok()) throw mapper::ProbeError(r.error);
    return *r.inventory;
  });
  return prober.probe(hosts);
}

}  // namespace ddl::lsf
