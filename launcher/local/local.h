#pragma once

#include <memory>

#include "launcher/backend.h"
#include "launcher/descriptor.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"

namespace ddl::launcher {

/// Forks and execs every rank on this host: its own process group, its CPU set, its
/// environment (rank_environment), stdin /dev/null except rank 0's; serves PMIx to them when
/// options.pmix_server.
std::unique_ptr<Backend> make_local_backend(const Job& job, const LaunchOptions& options);

/// local's row of the table of backends (launcher/backends.cc): auto picks it when every host is
/// this host.
extern const BackendDescriptor kLocalBackend;

}  // namespace ddl::launcher
