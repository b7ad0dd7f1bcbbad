#pragma once

#include <memory>

#include "launcher/backend.h"
#include "launcher/descriptor.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"
#include "launcher/ssh/agent.h"
#include "launcher/ssh/tree_links.h"
#include "ssh/session.h"

namespace ddl::launcher {

/// Connects to every host over ssh (libssh, in parallel), runs `ddlrun --agent` there, sends it
/// the job, and relays its ranks' output and exit statuses. An agent kills its ranks when the
/// connection to ddlrun drops.
std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options);
/// The same, logging in through `connector` (a fake, in tests), which outlives the backend.
std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options,
                                          ddl::ssh::Connector& connector);

/// `ddlrun --agent`: the per-host side of the ssh backend, speaking the agent protocol
/// (protocol.h) on `in_fd` and `out_fd`. Never returns: exits with 0 when its ranks ran
/// (their statuses went up the channel), else non-zero. `services` answers ddlrun's requests
/// before the job: this host's --probe-links agent (ssh/tree_links.h) and its inventory.
[[noreturn]] void run_agent(int in_fd, int out_fd, const AgentServices& services = {});

/// ssh's row of the table of backends (launcher/backends.cc): auto picks it when nothing before it
/// fits.
extern const BackendDescriptor kSshBackend;

}  // namespace ddl::launcher
