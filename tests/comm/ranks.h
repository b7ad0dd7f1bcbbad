#pragma once
// Threads as ranks for the communicator's tests: a grid topology and a runner.

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/core/communicator.h"
#include "tests/comm/memory_bootstrap.h"

namespace ddl::comm::test_ranks {

using namespace std::chrono_literals;

/// A topology of `hosts` hosts x `per_host` ranks, host-major, rings by default_rings.
inline Topology grid(int per_host, int hosts, const std::string& job) {
  Topology t;
  t.job_id = job;
  for (int h = 0; h < hosts; ++h)
    t.hosts.push_back({h, "h" + std::to_string(h), "127.0.0.1", {}});
  for (int r = 0; r < per_host * hosts; ++r)
    t.ranks.push_back({r, r % per_host, r / per_host, -1, "", "", {}, "", ""});
  t.mode = parse_mode("p:" + std::to_string(per_host) + "x" + std::to_string(hosts));
  t.rings = default_rings({per_host, hosts});
  return t;
}

/// Runs `body(comm)` on `n` threads, each with its own Communicator.
inline void run_ranks(int n, const std::optional<Topology>& topology, CommOptions options,
                      const std::function<void(Communicator&)>& body) {
  auto boots = make_memory_bootstraps(n);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator c(std::move(boots[r]), topology, options, "token");
        body(c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

inline CommOptions fast(std::string_view algo = "auto") {
  CommOptions o;
  o.timeout = 20s;
  o.algo = find_allreduce(algo);
  return o;
}

}  // namespace ddl::comm::test_ranks
