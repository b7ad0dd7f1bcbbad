#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace ddl::ddlrun {

/// What a long probe is waiting for: while hosts have not answered, every `every` a line such
/// as "ddlrun: still probing after 10 s: 2 of 40 hosts have not answered: node3, node17"
/// (the first kShownHosts names, then "and N more") goes to `say`, from a thread of its own.
/// settled() takes a host off the list (mapper::HostProbeOptions::on_settled); the destructor stops
/// the thread.
class ProbeProgress {
 public:
  /// At most this many host names in a line.
  static constexpr size_t kShownHosts = 8;

  ProbeProgress(std::vector<std::string> hosts, std::chrono::milliseconds every,
                std::function<void(const std::string& line)> say);
  ~ProbeProgress();
  ProbeProgress(const ProbeProgress&) = delete;
  ProbeProgress& operator=(const ProbeProgress&) = delete;

  /// `host` answered (or failed): no longer waited for.
  void settled(const std::string& host);

  /// The line for `waiting` (in the order given) of `total` hosts after `seconds`.
  static std::string line(const std::vector<std::string>& waiting, size_t total, long seconds);

 private:
  void run();

  std::vector<std::string> hosts_;  ///< in the order given, each once
  std::set<std::string> done_;
  std::chrono::milliseconds every_;
  std::function<void(const std::string&)> say_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddl::ddlrun
