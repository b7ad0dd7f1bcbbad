// Upward (upward.h): an agent's writes to its parent, off the sending threads.

#include "launcher/ssh/upward.h"

#include <thread>

#include "base/fd.h"

namespace ddl::launcher::ssh {

Upward::Upward(int fd) : shared_(new Shared) {
  std::thread(write_loop, fd, std::ref(*shared_)).detach();
}

bool Upward::put(std::string_view bytes) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->failed) return false;
  shared_->queue.append(bytes);
  shared_->changed.notify_all();
  return true;
}

bool Upward::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(shared_->mutex);
  shared_->changed.wait_for(lock, timeout, [&] {
    return shared_->failed || (shared_->queue.empty() && !shared_->writing);
  });
  return !shared_->failed && shared_->queue.empty() && !shared_->writing;
}

size_t Upward::waiting() {
  std::lock_guard lock(shared_->mutex);
  return shared_->queue.size();
}

void Upward::write_loop(int fd, Shared& shared) {
  std::string bytes;
  std::unique_lock lock(shared.mutex);
  for (;;) {
    shared.changed.wait(lock, [&] { return !shared.queue.empty(); });
    bytes.clear();
    bytes.swap(shared.queue);
    shared.writing = true;
    lock.unlock();
    const int error = base::write_all(fd, bytes);
    lock.lock();
    shared.writing = false;
    if (error != 0) {
      shared.failed = true;
      shared.queue.clear();
      shared.changed.notify_all();
      return;
    }
    shared.changed.notify_all();
  }
}

}  // namespace ddl::launcher::ssh
