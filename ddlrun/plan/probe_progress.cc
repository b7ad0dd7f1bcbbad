// ProbeProgress (probe_progress.h): the lines a long probe prints about the hosts it waits for.
//
// How it works: a thread sleeps on a condition variable for `every` at a time; each time it
// wakes without being stopped it lists the hosts not yet settled, in the order given, and says
// the line unless none is left. settled() only adds to a set under the lock, so the probe's
// threads never wait on the line being written.

#include "ddlrun/plan/probe_progress.h"

#include "hostfiles/hostfiles.h"

namespace ddl::ddlrun {

ProbeProgress::ProbeProgress(std::vector<std::string> hosts, std::chrono::milliseconds every,
                             std::function<void(const std::string& line)> say)
    : every_(every), say_(std::move(say)) {
  std::set<std::string> seen;
  for (std::string& h : hosts)
    if (seen.insert(h).second) hosts_.push_back(std::move(h));
  if (!hosts_.empty()) thread_ = std::thread([this] { run(); });
}

ProbeProgress::~ProbeProgress() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProbeProgress::settled(const std::string& host) {
  std::lock_guard lock(mutex_);
  done_.insert(host);
}

std::string ProbeProgress::line(const std::vector<std::string>& waiting, size_t total,
                                long seconds) {
  std::string text = "ddlrun: still probing after " + std::to_string(seconds) +
                     " s: " + std::to_string(waiting.size()) + " of " + std::to_string(total) +
                     (total == 1 ? " host has" : " hosts have") + " not answered: ";
  for (size_t i = 0; i < waiting.size() && i < kShownHosts; ++i)
    text += (i > 0 ? ", " : "") + hostfiles::printable(waiting[i], false);
  if (waiting.size() > kShownHosts)
    text += ", and " + std::to_string(waiting.size() - kShownHosts) + " more";
  return text;
}

void ProbeProgress::run() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  for (auto next = start + every_;; next += every_) {
    if (changed_.wait_until(lock, next, [&] { return stop_; })) return;
    std::vector<std::string> waiting;
    for (const std::string& h : hosts_)
      if (!done_.contains(h)) waiting.push_back(h);
    if (waiting.empty()) return;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(next - start).count();
    const std::string text = line(waiting, hosts_.size(), static_cast<long>(seconds));
    lock.unlock();
    say_(text);
    lock.lock();
  }
}

}  // namespace ddl::ddlrun
