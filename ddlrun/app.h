#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "ddlrun/plan/plan.h"
#include "hostfiles/hostfiles.h"

namespace ddl::ddlrun {

/// ddlrun's exit statuses (man ddlrun(1), EXIT STATUS). A failed rank's own status is passed
/// through; these are ddlrun's.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< ddlrun itself could not run the job
inline constexpr int kExitUsage = 2;    ///< bad command line, host list, file or mode
inline constexpr int kExitTimeout = 124;

/// Runs ddlrun with `args` (without argv[0]): results go to `out`, diagnostics to `err`, the
/// environment is read through `getenv_fn`, and other hosts' hardware through `remote` (ssh by
/// default). Returns the exit status. Catches every error once and prints it as
/// "ddlrun: error: <message>".
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        hostfiles::GetEnv getenv_fn = hostfiles::process_getenv, void* env_context = nullptr,
        const RemoteProbe& remote = {});

}  // namespace ddl::ddlrun
