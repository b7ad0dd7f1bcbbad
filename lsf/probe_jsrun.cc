// Probing an LSF job's compute hosts through jsrun (see probe_jsrun.h).
//
// How it works. jsrun places resource sets host by host; with one set per host (-r 1) holding
// the whole host (-c ALL_CPUS -g ALL_GPUS, unbound, so hwloc sees every thread and GPU) and one
// task per set, a step of N sets runs `ddlrun --probe` once on each of the job's N compute
// hosts. `--stdio_mode prepended` puts "RANK: " before every line of a task's output, so the N
// inventories come apart again; each names the host it ran on, which is how it is matched to
// the host list (jsrun's rank order is not relied on).

#include "lsf/probe_jsrun.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>

#include "hostfiles/host_list.h"
#include "hostfiles/input_error.h"
#include "launcher/external.h"
#include "mapper/inventory.h"

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

mapper::RemoteOutput spawn_and_read(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& environ,
                                    std::chrono::milliseconds timeout) {
  mapper::RemoteOutput result;
  int out_fds[2], err_fds[2];
  if (pipe2(out_fds, O_CLOEXEC) != 0) {
    result.exit_status = 127;
    result.err = std::strerror(errno);
    return result;
  }
  if (pipe2(err_fds, O_CLOEXEC) != 0) {
    result.exit_status = 127;
    result.err = std::strerror(errno);
    close(out_fds[0]);
    close(out_fds[1]);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group, killed as one
  std::vector<char*> cargv, cenv;
  for (const std::string& s : argv)
    cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& s : environ)
    cenv.push_back(const_cast<char*>(s.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_fds[1]);
  close(err_fds[1]);
  if (rc != 0) {
    close(out_fds[0]);
    close(err_fds[0]);
    result.exit_status = 127;
    result.err = std::strerror(rc);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_fds[0], POLLIN, 0}, {err_fds[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        sinks[i]->append(buf, static_cast<size_t>(got));
      }
    }
  }
  if (timed_out) kill(-pid, SIGKILL);
  for (const pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    result.exit_status = -1;
    result.signal = "KILL";
    result.err += "\n(timed out after " + std::to_string(timeout.count() / 1000) + " s)";
  } else if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else {
    result.exit_status = -1;
    result.signal = strsignal(WTERMSIG(status));
  }
  return result;
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
  // The job's compute hosts, or why jsrun cannot probe any of them.
  std::vector<std::string> compute;
  std::string why_not;
  struct Env {
    const std::vector<std::string>* environ;
  } env{&options.environ};
  try {
    const std::optional<hostfiles::HostList> allocation = hostfiles::allocation_from_environment(
        [](const char* name, void* context) {
          return launcher::environ_value(*static_cast<Env*>(context)->environ, name);
        },
        &env);
    if (!allocation || !launcher::environ_value(options.environ, "LSB_JOBID")) {
      why_not = "not inside an LSF job, so jsrun cannot probe it";
    } else {
      for (const hostfiles::Host& h : allocation->hosts())
        compute.push_back(h.name);
    }
  } catch (const hostfiles::InputError& e) {
    why_not = std::string("cannot read the LSF job's hosts: ") + e.what();
  }

  // One jsrun step for every host that is not cached, run by whichever host asks first.
  struct Step {
    std::once_flag once;
    std::map<std::string, mapper::HostProbe> by_host;
  } step;
  auto run_step = [&] {
    std::string path = "jsrun";  // a fake RunCommand gets it unresolved
    if (!options.run) {
      path = launcher::find_in_path(
          "jsrun", launcher::environ_value(options.environ, "PATH").value_or("/usr/bin:/bin"));
    }
    std::vector<mapper::HostProbe> results;
    if (path.empty()) {
      for (const std::string& h : compute) {
        results.push_back(
            {h, std::nullopt, "jsrun is not on $PATH, so it cannot probe the host", false});
      }
    } else {
      std::vector<std::string> argv =
          jsrun_probe_command(options.ddlrun_path, compute.size(), options.environ);
      const std::string command = launcher::shell_join(argv);
      argv[0] = path;
      const mapper::RemoteOutput output =
          options.run ? options.run(argv, options.environ)
                      : spawn_and_read(argv, options.environ, options.timeout);
      results = parse_jsrun_probe(compute, command, output);
    }
    for (mapper::HostProbe& r : results)
      step.by_host.emplace(r.host, std::move(r));
  };
  mapper::SshProbeOptions cache;
  cache.job_id = options.job_id;
  cache.cache_dir = options.cache_dir;
  mapper::RemoteProber prober(cache, [&](const std::string& host) -> mapper::Inventory {
    if (!why_not.empty()) throw mapper::ProbeError(why_not);
    if (std::find(compute.begin(), compute.end(), host) == compute.end()) {
      throw mapper::ProbeError("not a compute host of this LSF job, so jsrun cannot reach it");
    }
    std::call_once(step.once, run_step);
    const mapper::HostProbe& r = step.by_host.at(host);
    if (!r.ok()) throw mapper::ProbeError(r.error);
    return *r.inventory;
  });
  return prober.probe(hosts);
}

}  // namespace ddl::lsf
