// launcher's table of backends: each backend folder's row (and the two names that pick one);
// lsf/ adds jsrun's, ddlrun/backends.cc joins them. A new backend is its folder (whose
// descriptor is its row), its line here and its section of ddlrun(1).

#include "launcher/descriptor.h"
#include "launcher/flux/flux.h"
#include "launcher/local/local.h"
#include "launcher/mpirun/mpirun.h"
#include "launcher/prterun/prterun.h"
#include "launcher/srun/srun.h"
#include "launcher/ssh/ssh.h"

namespace ddl::launcher {

namespace {

using Picks = BackendDescriptor::Picks;

constexpr BackendDescriptor kAuto{.name = "auto", .picks = Picks::kAnyRule};

constexpr BackendDescriptor kPmix{.name = "pmix", .picks = Picks::kPmixServers};

constexpr const BackendDescriptor* kBackends[] = {&kAuto,          &kLocalBackend, &kSshBackend,
                                                  &kMpirunBackend, &kPmix,         &kPrterunBackend,
                                                  &kSrunBackend,   &kFluxBackend};

}  // namespace

BackendTable builtin_backends() {
  return kBackends;
}

}  // namespace ddl::launcher
