#pragma once

// Helpers shared by the ssh launcher's tests (ssh_backend_test, ssh_tree_test,
// tree_start_test): an agent's hello as it writes it, the frames in a stream of bytes, and the
// events a backend pushes until its ranks ended.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/backend.h"
#include "launcher/ssh/protocol.h"
#include "launcher/wire.h"

namespace ddl::launcher::test {

/// The hello frame an agent on `host` writes (reached at 10.9.9.9, ports 5000 and 5001).
inline std::string hello_frame(const std::string& host) {
  std::string hello;
  wire::put_str(hello, host);
  wire::put_str(hello, "10.9.9.9");
  wire::put_u32(hello, 5000);
  wire::put_u32(hello, 5001);
  return ssh::encode_frame(ssh::FrameType::kHello, 0, hello);
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
    if (e->type == Event::Type::kExit || e->type == Event::Type::kHostFailure) --exits;
    got.push_back(std::move(*e));
  }
  return got;
}

}  // namespace ddl::launcher::test
