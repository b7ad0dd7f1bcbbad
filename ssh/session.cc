// What ssh/session.h offers besides libssh: kept sessions, and the texts of its messages.
//
// Kept sessions' keep-alive: one thread, made with every signal blocked, wakes each interval
// (or at once when the sessions are destroyed), lists the hosts kept at that moment, and beats
// each in turn, taking the lock anew for each one so that a take() waits for one beat at most;
// a host taken meanwhile is skipped.

#include "ssh/session.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace ddl::ssh {

void KeptSessions::put(const std::string& host, Kept kept) {
  Kept old;  // closed outside the lock
  const std::lock_guard lock(mutex_);
  if (auto it = kept_.find(host); it != kept_.end()) old = std::move(it->second);
  kept_[host] = std::move(kept);
}

KeptSessions::Kept KeptSessions::take(const std::string& host) {
  const std::lock_guard lock(mutex_);
  auto it = kept_.find(host);
  if (it == kept_.end()) return {};
  Kept kept = std::move(it->second);
  kept_.erase(it);
  return kept;
}

bool KeptSessions::has(const std::string& host) const {
  const std::lock_guard lock(mutex_);
  const auto it = kept_.find(host);
  return it != kept_.end() && it->second.session != nullptr;
}

std::size_t KeptSessions::size() const {
  const std::lock_guard lock(mutex_);
  return kept_.size();
}

void KeptSessions::keep_alive(std::function<void(Kept&)> beat, std::chrono::milliseconds interval) {
  std::lock_guard lock(mutex_);
  beat_ = std::move(beat);
  interval_ = interval;
  if (beater_.joinable()) return;
  // Made with every signal blocked, which it keeps: ddlrun takes SIGINT and the like with
  // sigtimedwait() on threads that block them, and a thread that did not would get them.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  beater_ = std::thread([this] { beat_all(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void KeptSessions::beat_all() {
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, interval_, [this] { return stopping_; })) {
    std::vector<std::string> names;
    for (const auto& [name, kept] : kept_)
      names.push_back(name);
    for (const std::string& name : names) {  // the lock taken again for each: take() waits less
      lock.unlock();
      lock.lock();
      if (stopping_) return;
      if (auto it = kept_.find(name); it != kept_.end()) beat_(it->second);
    }
  }
}

KeptSessions::~KeptSessions() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (beater_.joinable()) beater_.join();
}

std::string descriptor_exhaustion(int err) {
  if (err == ENFILE) {
    return "the system's open files are exhausted (fs.file-max): close some, or raise it";
  }
  if (err != EMFILE) return "";
  rlimit limit{};
  const std::string n = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                            ? std::to_string(limit.rlim_cur)
                            : std::string("unknown");
  return "too many open files (limit " + n + "): raise ulimit -n";
}

std::string descriptors_exhausted_now() {
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  return descriptor_exhaustion(errno);
}

bool write_some(Channel& channel, std::string& pending, bool* socket_full, std::size_t* wrote) {
  if (socket_full != nullptr) *socket_full = false;
  while (!pending.empty()) {
    if (!channel.flushed()) {
      if (socket_full != nullptr) *socket_full = true;
      return true;
    }
    const std::uint32_t window = channel.window();
    if (window == 0) return true;
    const int n = channel.write(
        std::string_view(pending).substr(0, std::min<size_t>(pending.size(), window)));
    if (n < 0) return false;
    if (n == 0) return true;
    pending.erase(0, static_cast<size_t>(n));
    if (wrote != nullptr) *wrote += static_cast<size_t>(n);
  }
  return true;
}

bool Outbox::write(Channel& channel) {
  std::size_t wrote = 0;
  const bool ok = write_some(channel, bytes_, &socket_full_, &wrote);
  const std::uint64_t moved = channel.moved();
  if (wrote > 0 || moved != moved_ || bytes_.empty()) last_progress_ = Clock::now();
  moved_ = moved;
  return ok;
}

bool Outbox::stalled(std::chrono::milliseconds deadline) const {
  return !bytes_.empty() && Clock::now() - last_progress_ > deadline;
}

}  // namespace ddl::ssh
