// probe_ssh_driver: probes hosts over ssh with mapper/probe_ssh.h for probe_ssh_test.sh.
//
//   probe_ssh_driver [--config F] [--known-hosts F] [--accept-new] [--timeout-ms N]
//                    [--probe PATH] [--command CMD] [--job-id ID] [--cache-dir D] HOST...
//
// Prints one line per host, "HOST: ok hostname=NAME cached=yes|no" or "HOST: error: REASON"
// (the reason's lines joined by " | "), then format_probe_failures() on stderr. Exit status: 0
// when every host was probed, 1 when some were not, 2 for a bad command line.

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "mapper/probe_ssh.h"

int main(int argc, char** argv) {
  ddl::mapper::SshProbeOptions o;
  std::vector<std::string> hosts;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 == argc) {
        std::cerr << "probe_ssh_driver: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") {
      o.ssh_config = value();
    } else if (a == "--known-hosts") {
      o.known_hosts = value();
    } else if (a == "--accept-new") {
      o.host_key_policy = ddl::mapper::HostKeyPolicy::kAcceptNew;
    } else if (a == "--timeout-ms") {
      o.connect_timeout = std::chrono::milliseconds(std::stoi(value()));
    } else if (a == "--probe") {
      o.probe_path = value();
    } else if (a == "--command") {
      o.remote_command = value();
    } else if (a == "--job-id") {
      o.job_id = value();
    } else if (a == "--cache-dir") {
      o.cache_dir = value();
    } else if (a.rfind("--", 0) == 0) {
      std::cerr << "probe_ssh_driver: unknown option " << a << "\n";
      return 2;
    } else {
      hosts.push_back(a);
    }
  }
  const std::vector<ddl::mapper::HostProbe> results = ddl::mapper::probe_hosts_ssh(hosts, o);
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
  const std::string failures = ddl::mapper::format_probe_failures(results);
  std::cerr << failures;
  return failures.empty() ? 0 : 1;
}
