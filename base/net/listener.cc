// A listener's guard against strangers (how it works in listener.h).

#include "base/net/listener.h"

#include <algorithm>

namespace ddl::base::net {

GuardLimits server_limits(std::chrono::milliseconds hello_time) {
  GuardLimits limits;
  limits.hello_time = hello_time;
  return limits;
}

ListenerGuard::Clock::time_point ListenerGuard::room_at() const {
  if (waiting_.size() < limits_.max_waiting) return Clock::time_point{};
  return waiting_.front().since + limits_.grace;
}

std::vector<ListenerGuard::Id> ListenerGuard::arrive(Id id) {
  const Clock::time_point now = Clock::now();
  waiting_.push_back({id, now});
  std::vector<Id> close;
  while (waiting_.size() > limits_.max_waiting && waiting_.front().id != id &&
         waiting_.front().since + limits_.grace <= now) {
    close.push_back(waiting_.front().id);
    waiting_.pop_front();
    if (!crowded_told_) {
      crowded_told_ = true;
      tell(notices_.crowded);
    }
  }
  return close;
}

void ListenerGuard::settled(Id id) {
  const auto it =
      std::find_if(waiting_.begin(), waiting_.end(), [id](const Waiting& w) { return w.id == id; });
  if (it != waiting_.end()) waiting_.erase(it);
}

std::vector<ListenerGuard::Id> ListenerGuard::overdue() {
  const Clock::time_point now = Clock::now();
  std::vector<Id> late;
  while (!waiting_.empty() && waiting_.front().since + limits_.hello_time < now) {
    late.push_back(waiting_.front().id);
    waiting_.pop_front();
  }
  return late;
}

ListenerGuard::Clock::time_point ListenerGuard::next_due() const {
  if (waiting_.empty()) return Clock::now() + std::chrono::hours(1);
  return waiting_.front().since + limits_.hello_time;
}

void ListenerGuard::refused(const std::string& line) {
  if (++refusals_ <= limits_.max_reports) tell(line);
  if (refusals_ == limits_.max_reports + 1) tell(notices_.more_refused);
}

}  // namespace ddl::base::net
