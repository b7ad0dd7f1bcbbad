// ddlrun's one table of backends, and the only file of ddlrun that names lsf/'s backend: the
// jsrun row plugs in here after launcher/'s own.

#include "ddlrun/backends.h"

#include <vector>

#include "base/check.h"
#include "lsf/lsf.h"

namespace ddl::ddlrun {

launcher::BackendTable backends() {
  static const std::vector<const launcher::BackendDescriptor*> table = [] {
    const launcher::BackendTable own = launcher::builtin_backends();
    std::vector<const launcher::BackendDescriptor*> all(own.begin(), own.end());
    all.push_back(&lsf::kJsrunBackend);
    return all;
  }();
  return table;
}

const launcher::BackendDescriptor& backend_named(std::string_view name) {
  const launcher::BackendDescriptor* b = launcher::find_backend(backends(), name);
  // auto and pmix: choose() made them local, ssh, srun or jsrun.
  if (b == nullptr || b->picks != launcher::BackendDescriptor::Picks::kNothing) {
    DDL_FAIL("no launcher was chosen");
  }
  return *b;
}

const launcher::BackendDescriptor& chosen_backend(const JobPlan& plan) {
  return plan.launcher.backend != nullptr ? *plan.launcher.backend : backend_named("local");
}

launcher::Choice choose_backend(std::string_view requested, const launcher::Situation& situation) {
  return launcher::choose(backends(), requested, situation);
}

RemoteProbe launcher_probe(const launcher::BackendDescriptor& backend, const std::string& job_id) {
  DDL_CHECK(&backend == &lsf::kJsrunBackend,
            "the " + std::string(backend.name) + " launcher cannot probe hosts");
  return [job_id](const std::vector<std::string>& hosts) {
    lsf::JsrunProbeOptions jo;
    jo.ddlrun_path = self_path();
    jo.environ = launcher::current_environment();
    jo.job_id = job_id;
    return lsf::probe_hosts_jsrun(hosts, jo);
  };
}

void set_backend_options(launcher::LaunchOptions& lo, const JobPlan& plan, const Options& o) {
  lo.settings = o.backend_settings;
  lo.host_pus = lsf::usable_pus(plan.inventories);
}

}  // namespace ddl::ddlrun
