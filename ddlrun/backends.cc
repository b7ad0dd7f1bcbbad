// ddlrun's one table from --launcher name (choose.h's Kind) to backend, and the only file of
// ddlrun that includes lsf/: the jsrun backend plugs in here like launcher/'s own.

#include "ddlrun/backends.h"

#include <array>

#include "base/check.h"
#include "lsf/lsf.h"

namespace ddl::cli {

namespace {

using launcher::Kind;

const std::array<launcher::BackendEntry, 6> kBackends = {{
    {Kind::kLocal, launcher::make_local_backend, nullptr},
    {Kind::kSsh, launcher::make_ssh_backend, nullptr},
    {Kind::kMpirun, nullptr, launcher::make_mpirun_launcher},
    {Kind::kPrterun, nullptr, launcher::make_prterun_launcher},
    {Kind::kSrun, nullptr, launcher::make_srun_launcher},
    {Kind::kJsrun, nullptr, lsf::make_jsrun_launcher},
}};

}  // namespace

const launcher::BackendEntry& backend_entry(Kind kind) {
  for (const launcher::BackendEntry& e : kBackends) {
    if (e.kind == kind) return e;
  }
  // auto and pmix: choose() made them local, ssh, srun or jsrun.
  DDL_FAIL("no launcher was chosen");
}

RemoteProbe launcher_probe(Kind kind, const std::string& job_id) {
  DDL_CHECK(kind == Kind::kJsrun,
            "the " + std::string(launcher::to_string(kind)) + " launcher cannot probe hosts");
  return [job_id](const std::vector<std::string>& hosts) {
    lsf::JsrunProbeOptions jo;
    jo.ddlrun_path = self_path();
    jo.environ = launcher::current_environment();
    jo.job_id = job_id;
    return lsf::probe_hosts_jsrun(hosts, jo);
  };
}

void set_backend_options(launcher::LaunchOptions& lo, const JobPlan& plan, const Options& o) {
  lo.jsrun_mode = o.jsrun_mode;
  lo.smpiargs = o.smpiargs;
  lo.host_pus = lsf::usable_pus(plan.inventories);
}

}  // namespace ddl::cli
