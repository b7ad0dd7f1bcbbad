// A row of ddlrun's table of backends: ddlrun's own launchers make their backend; the
// external ones make an ExternalLauncher, which make_external_backend runs.

#include "launcher/factory.h"

#include "base/check.h"

namespace ddl::launcher {

std::unique_ptr<Backend> BackendEntry::make(const Job& job, const LaunchOptions& options) const {
  if (make_backend != nullptr) return make_backend(job, options);
  return make_external_backend(*make_launcher(options), job, options);
}

ExternalCommand BackendEntry::preview(const Job& job, const LaunchOptions& options) const {
  DDL_CHECK(make_launcher != nullptr,
            "the " + std::string(to_string(kind)) + " launcher runs no other program to preview");
  return preview_external(*make_launcher(options), job, options);
}

}  // namespace ddl::launcher
