#pragma once

// Helpers shared by the ssh launcher's tests (ssh_backend_test, ssh_tree_test,
// agent_tree_test, tree_links_test): an agent's hello as it writes it, a chain of three hosts'
// job, the frames in a stream of bytes, and the events a backend pushes until its ranks ended.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/net/codec.h"
#include "comm/mode.h"
#include "comm/topology.h"
#include "launcher/backend.h"
#include "launcher/job.h"
#include "launcher/ssh/protocol.h"

namespace ddl::launcher::test {

/// The hello frame an agent on `host` writes (reached at 10.9.9.9, ports 5000 and 5001).
inline std::string hello_frame(const std::string& host) {
  std::string hello;
  base::net::put_str(hello, host);
  base::net::put_str(hello, "10.9.9.9");
  base::net::put_u32(hello, 5000);
  base::net::put_u32(hello, 5001);
  return ssh::encode_frame(ssh::FrameType::kHello, 0, hello);
}

/// n1 n2 n3 (indices 0 1 2), a rank each; at --tree-width 1 a chain n1 -> n2 -> n3.
inline Job chain_job() {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "job-1";
  t.hosts = {{0, "n1", "10.0.0.1", {}}, {1, "n2", "10.0.0.2", {}}, {2, "n3", "10.0.0.3", {}}};
  for (int r = 0; r < 3; ++r)
    t.ranks.push_back({r, 0, r, -1, "", "", comm::CpuSet(), "", ""});
  t.mode = comm::parse_mode("p:1x3");
  t.rings = comm::default_rings({1, 3});
  job.argv = {"train"};
  job.token = "abc";
  return job;
}

/// The frames in `bytes`, heartbeats left out.
inline std::vector<ssh::Frame> frames(const std::string& bytes) {
  ssh::FrameReader reader;
  reader.feed(bytes);
  std::vector<ssh::Frame> out;
  while (auto f = reader.next()) {
    if (f->type != ssh::FrameType::kHeartbeat) out.push_back(std::move(*f));
  }
  return out;
}

/// Events until `exits` exits or host failures came (at most 5 s).
inline std::vector<Event> events_until(EventQueue& events, int exits) {
  std::vector<Event> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (exits > 0) {
    std::optional<Event> e = events.pop(deadline);
    if (!e) break;
    if (e->type == Event::Type::kWake) continue;  // a host said done (output_may_follow)
    if (e->type == Event::Type::kExit || e->type == Event::Type::kHostFailure) --exits;
    got.push_back(std::move(*e));
  }
  return got;
}

}  // namespace ddl::launcher::test
