#pragma once
// MemoryBootstrap, a test double for the bootstrap: the ranks are threads of one process, and
// their allgather meets in a table they share instead of over PMIx or ddlrun's rendezvous.
// Header-only, for the tests that run Communicators as threads.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/text.h"
#include "comm/bootstrap/bootstrap.h"

namespace ddl::comm {

/// One rank of `size` threads that share `table`: allgather waits for every thread's value of
/// the same round, or throws BootstrapError naming the ranks that did not join within `timeout`.
class MemoryBootstrap : public Bootstrap {
 public:
  struct Table {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<uint32_t, std::vector<std::optional<std::string>>> rounds;
  };

  MemoryBootstrap(std::shared_ptr<Table> table, int rank, int size)
      : table_(std::move(table)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> allgather(const std::string& value,
                                     std::chrono::milliseconds timeout) override {
    std::unique_lock lock(table_->mutex);
    auto& slots = table_->rounds[round_];
    slots.resize(size_);
    slots[rank_] = value;
    table_->changed.notify_all();
    const bool all = table_->changed.wait_for(lock, timeout, [&] {
      return std::all_of(slots.begin(), slots.end(), [](const auto& s) { return s.has_value(); });
    });
    if (!all) {
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!slots[r]) missing.push_back(r);
      throw BootstrapError(rank_list(missing) + " did not join within " +
                           base::seconds_text(timeout));
    }
    std::vector<std::string> out;
    for (const auto& s : slots)
      out.push_back(*s);
    ++round_;
    return out;
  }

 private:
  std::shared_ptr<Table> table_;
  int rank_;
  int size_;
  uint32_t round_ = 0;
};

/// `size` bootstraps of threads that share one table, by rank.
inline std::vector<std::unique_ptr<Bootstrap>> make_memory_bootstraps(int size) {
  auto table = std::make_shared<MemoryBootstrap::Table>();
  std::vector<std::unique_ptr<Bootstrap>> out;
  for (int r = 0; r < size; ++r)
    out.push_back(std::make_unique<MemoryBootstrap>(table, r, size));
  return out;
}

}  // namespace ddl::comm
