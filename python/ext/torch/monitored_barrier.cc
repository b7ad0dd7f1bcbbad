// ProcessGroupDdl::monitoredBarrier: torch's monitored_barrier for ddl groups, with gloo's texts.
//
// How it works: the ranks meet through the group's store (torch's, prefixed by the group), under
// keys of the call's round ("ddl/monitored_barrier/<round>/..."; every member counts its calls).
// Every rank but 0 sets its key and waits for rank 0's "release"; rank 0 waits for the other
// ranks' keys in rank order within the timeout, then sets "release" and waits until each has
// said it saw it (the store may live in rank 0's process). A rank that is not there in
// time is named on rank 0 ("Rank 2 failed to pass monitoredBarrier in 2000 ms"; with
// waitAllRanks, rank 0 keeps waiting and names them all: "Ranks 1, 2 failed ..."), and rank 0
// never releases the round, so the ranks that came fail in turn when their timeout runs out,
// pointing to rank 0's error. Nothing passes through libddl: a rank stuck in a collective cannot
// hold the barrier up.
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "process_group_ddl.h"

namespace ddl::python {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// The barrier's timeout: opts.timeout, or $DDL_TIMEOUT (else 1800 s) when unset (negative).
milliseconds timeout_of(const c10d::BarrierOptions& opts) {
  if (opts.timeout.count() >= 0) return opts.timeout;
  const char* seconds = std::getenv("DDL_TIMEOUT");
  const double value = seconds != nullptr ? std::atof(seconds) : 1800.0;
  return milliseconds(static_cast<int64_t>(value * 1000));
}

/// Whether `key` appears in `store` within `timeout`. Polled with check(), never with a wait()
/// that may time out: torch's TCPStore client (1.13) keeps a timed-out wait's answer pending on
/// its socket, and the store's next call then reads it as its own (seen as new_group's store
/// barrier never ending on rank 0 after a rank came late to a monitored barrier).
bool arrives(c10d::Store& store, const std::string& key, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (auto pause = milliseconds(1);; pause = std::min(pause * 2, milliseconds(50))) {
    if (store.check({key})) return true;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    std::this_thread::sleep_for(std::min(pause, left));
  }
}

}  // namespace

void ProcessGroupDdl::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  TORCH_CHECK(store_ddl_, "ddl backend: monitored_barrier: this group has no store");
  const milliseconds timeout = timeout_of(opts);
  const std::string key = "ddl/monitored_barrier/" + std::to_string(++barrier_rounds_) + "/";
  if (rank_ != 0) {
    store_ddl_->set(key + std::to_string(rank_), std::vector<uint8_t>{1});
    TORCH_CHECK(arrives(*store_ddl_, key + "release", timeout), "Rank ", rank_,
                " successfully reached monitoredBarrier, but received errors while waiting for "
                "send/recv from rank 0. Please check rank 0 logs for faulty rank.");
    store_ddl_->set(key + "seen/" + std::to_string(rank_), std::vector<uint8_t>{1});
    return;
  }
  const Clock::time_point start = Clock::now();
  std::vector<int> missing;
  for (int peer = 1; peer < size_; ++peer) {
    const auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    TORCH_CHECK(spent < timeout || !missing.empty(), "Rank 0 timed out in monitoredBarrier after ",
                spent.count(), " ms.");
    if (arrives(*store_ddl_, key + std::to_string(peer), timeout - spent)) continue;
    missing.push_back(peer);
    if (!waitAllRanks) break;
  }
  TORCH_CHECK(missing.empty(), missing.size() == 1 ? "Rank " : "Ranks ", c10::Join(", ", missing),
              " failed to pass monitoredBarrier in ", timeout.count(), " ms");
  store_ddl_->set(key + "release", std::vector<uint8_t>{1});
  // Rank 0 leaves once every rank has seen the release (within the timeout): the store may live
  // in rank 0's process (torchrun), and a rank still polling it would lose it.
  for (int peer = 1; peer < size_; ++peer) {
    const auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (!arrives(*store_ddl_, key + "seen/" + std::to_string(peer), timeout - spent)) break;
  }
}

}  // namespace ddl::python
