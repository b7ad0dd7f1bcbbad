// ddlrun-probe: prints this host's inventory (or an hwloc XML recording's) as YAML, as
// `ddlrun --probe` does; a build-tree tool for looking at recordings (tests/topologies/README.md).

#include <array>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "hostfiles/hostfiles.h"
#include "mapper/inventory.h"
#include "mapper/probe_hwloc.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr std::string_view kHelp =
    "Usage: ddlrun-probe [--xml FILE] [--no-nvml]\n"
    "\n"
    "Prints this host's hardware as ddlrun sees it, as YAML: packages, cores and their\n"
    "hardware threads, NUMA nodes, GPUs and NICs with where each attaches.\n"
    "\n"
    "Options:\n"
    "  --xml FILE   read an hwloc XML recording instead of this host\n"
    "               (record one with 'lstopo --of xml FILE')\n"
    "  --no-nvml    do not ask NVML for GPU UUIDs and NVLink\n"
    "  -h, --help   print this help and exit\n";

int usage_error(const std::string& what) {
  std::cerr << "ddlrun-probe: error: " << what << "; see 'ddlrun-probe --help'\n";
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  ddl::mapper::ProbeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (a == "--no-nvml") {
      options.use_nvml = false;
    } else if (a == "--xml") {
      if (i + 1 == args.size()) return usage_error("--xml needs a file name");
      options.xml_path = args[++i];
    } else if (a.rfind("--xml=", 0) == 0) {
      options.xml_path = a.substr(6);
      if (options.xml_path.empty()) return usage_error("--xml needs a file name");
    } else {
      static constexpr std::array<std::string_view, 3> kOptions = {"--xml", "--no-nvml", "--help"};
      const std::string name = a.substr(0, a.find('='));
      return usage_error((a.rfind('-', 0) == 0 ? "unknown option '" : "unexpected argument '") + a +
                         "'" + ddl::base::did_you_mean(name, kOptions));
    }
  }
  try {
    std::cout << ddl::mapper::to_yaml(ddl::mapper::probe_hwloc(options));
    return kExitOk;
  } catch (const ddl::mapper::ProbeError& e) {
    std::cerr << "ddlrun-probe: error: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "ddlrun-probe: error: internal error: " << e.what() << " (please report this)\n";
    return kExitFailure;
  }
}
