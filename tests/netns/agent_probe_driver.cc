// agent_probe_driver: probes hosts over ssh through ddlrun's agents (ddlrun/plan/agents.h:
// each host logged in to, its agent asked for the inventory, flat) for probe_ssh_test.sh.
//
//   agent_probe_driver [--config F] [--known-hosts F] [--accept-new] [--timeout-ms N]
//                      [--probe DDLRUN] [--command CMD] [--job-id ID] [--cache-dir D] HOST...
//
// The agents' command is CMD, else 'DDLRUN --probe-agent'. Prints one line per host, "HOST: ok
// hostname=NAME cached=yes|no" or "HOST: error: REASON" (the reason's lines joined by " | "),
// then format_probe_failures() on stderr; every agent's session is closed before it exits.
// Exit status: 0 when every host was probed, 1 when some were not, 2 for a bad command line.

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "ddlrun/options.h"
#include "ddlrun/plan/agents.h"
#include "ddlrun/plan/plan.h"
#include "ddlrun/shell_words.h"

namespace {

/// The hosts' probe results through their agents, each session closed before it returns.
std::vector<ddl::mapper::HostProbe> probe(const std::vector<std::string>& hosts,
                                          const ddl::ddlrun::SshProbeOptions& o,
                                          const std::string& command) {
  ddl::launcher::ssh::AgentTree agents;
  return ddl::ddlrun::probe_through_tree(ddl::ddlrun::Options{}, hosts, hosts, o, command, 0,
                                         agents);
}

void print(const std::vector<ddl::mapper::HostProbe>& results) {
  for (const ddl::mapper::HostProbe& r : results) {
    if (r.ok()) {
      std::cout << r.host << ": ok hostname=" << r.inventory->hostname
                << " cached=" << (r.cached ? "yes" : "no") << "\n";
    } else {
      std::string reason = r.error;
      for (size_t at = reason.find('\n'); at != std::string::npos; at = reason.find('\n', at))
        reason.replace(at, 1, " | ");
      std::cout << r.host << ": error: " << reason << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ddl::ddlrun::SshProbeOptions o;
  std::string ddlrun = "ddlrun";
  std::string command;
  std::vector<std::string> hosts;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 == argc) {
        std::cerr << "agent_probe_driver: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") {
      o.ssh_config = value();
    } else if (a == "--known-hosts") {
      o.known_hosts = value();
    } else if (a == "--accept-new") {
      o.host_key_policy = ddl::ssh::HostKeyPolicy::kAcceptNew;
    } else if (a == "--timeout-ms") {
      o.connect_timeout = std::chrono::milliseconds(std::stoi(value()));
    } else if (a == "--probe") {
      ddlrun = value();
    } else if (a == "--command") {
      command = value();
    } else if (a == "--job-id") {
      o.job_id = value();
    } else if (a == "--cache-dir") {
      o.cache_dir = value();
    } else if (a.rfind("--", 0) == 0) {
      std::cerr << "agent_probe_driver: unknown option " << a << "\n";
      return 2;
    } else {
      hosts.push_back(a);
    }
  }
  if (command.empty()) command = ddl::ddlrun::quote_shell_word(ddlrun) + " --probe-agent";
  const std::vector<ddl::mapper::HostProbe> results = probe(hosts, o, command);
  print(results);
  const std::string failures = ddl::mapper::format_probe_failures(results);
  std::cerr << failures;
  return failures.empty() ? 0 : 1;
}
