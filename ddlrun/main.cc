#include <iostream>
#include <string_view>

#include "ddlrun/app.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

int main(int argc, char** argv) {
  // ddlrun itself (no helper role: those take their signals their own way, and a rank
  // wrapper's program must not inherit them blocked) takes SIGINT, SIGTERM and SIGHUP from
  // here on, so that none kills it by the default action while it probes and plans.
  const std::string_view role = argc > 1 ? argv[1] : "";
  const bool helper =
      role == "--agent" || role == "--probe-agent" || role == "--keeper" || role == "--rank-exec";
  if (!helper) ddl::launcher::guard_startup_signals(/*watch=*/false);
  // Before any thread and any other use of hwloc: the plugins it loads for the process (the
  // keeper and the rank wrapper use none).
  if (role != "--keeper" && role != "--rank-exec") ddl::mapper::choose_hwloc_plugins();
  if (!helper) ddl::launcher::guard_startup_signals();
  // Only the ddlrun program arms the keeper (`ddlrun --keeper`, keeper.h): code that calls
  // run() in-process, such as the unit tests, is not a program that knows --keeper.
  ddl::launcher::enable_keeper(ddl::ddlrun::self_path());
  // ddlrun's PMIx servers take this host's topology from the probe cache instead of
  // discovering it once more.
  ddl::launcher::provide_host_topology([] {
    return ddl::launcher::HostTopology{ddl::mapper::local_topology(/*use_cache=*/true),
                                       ddl::mapper::hwloc_source()};
  });
  return ddl::ddlrun::run(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
