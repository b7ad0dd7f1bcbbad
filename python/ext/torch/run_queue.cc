#include "run_queue.h"

#include <c10/core/GradMode.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <thread>
#include <utility>

namespace ddl::python {
namespace {

size_t inline_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("DDL_INLINE_BYTES");
    return v != nullptr && *v != '\0' ? static_cast<size_t>(std::strtoull(v, nullptr, 10))
                                      : size_t{64 * 1024};
  }();
  return bytes;
}

/// Runs a call, returning what it threw.
std::exception_ptr run_catching(const std::function<void()>& run) {
  try {
    run();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

// Queues are never destroyed: the interpreter may exit while their workers wait for more.
RunQueue& RunQueue::collectives() {
  static RunQueue* queue = new RunQueue;
  return *queue;
}

RunQueue& RunQueue::messages(bool send, int peer) {
  static std::mutex mutex;
  static auto* queues = new std::map<std::pair<bool, int>, RunQueue*>;
  std::lock_guard<std::mutex> lock(mutex);
  RunQueue*& queue = (*queues)[{send, peer}];
  if (queue == nullptr) queue = new RunQueue;
  return *queue;
}

bool RunQueue::inlinable(c10d::OpType type, const std::vector<at::Tensor>& outputs) {
  if (type == c10d::OpType::BARRIER || type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
      type == c10d::OpType::RECVANYSOURCE || type == c10d::OpType::ALLTOALL ||
      type == c10d::OpType::ALLTOALL_BASE) {
    return false;
  }
  // CPU or CUDA tensors alike: a GPU call is synchronous in libddl too (it returns once NCCL is
  // done), so on the caller's thread it only spares the hand-off (H100: 39 us a call before).
  size_t bytes = 0;
  for (const at::Tensor& tensor : outputs) {
    if (tensor.layout() != at::kStrided) return false;  // sparse: several calls, any size
    bytes += tensor.nbytes();
  }
  return inline_bytes() > 0 && bytes <= inline_bytes();
}

RunQueue::RunQueue() {
  std::thread([this] { loop(); }).detach();
}

bool RunQueue::run_inline(WorkDdl& work, const std::function<void()>& run) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_ || !items_.empty()) return false;
    busy_ = true;
  }
  std::exception_ptr error;
  {
    // Outputs are written in place; autograd has no part in a collective.
    c10::AutoGradMode no_grad(false);
    error = run_catching(run);
  }
  release();
  // After release(): the future's callbacks may issue (and wait for) further calls.
  work.complete(error);
  return true;
}

void RunQueue::push(c10::intrusive_ptr<WorkDdl> work, std::function<void()> run) {
  std::vector<Item> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back({std::move(work), std::move(run)});
    finished.swap(finished_);
  }
  cv_.notify_one();
}  // `finished` is freed here, on the caller's thread

// The worker never lets go of a tensor itself: a tensor made in Python may need the GIL to be
// freed, and a thread that asks for the GIL while the interpreter shuts down is ended on the
// spot (std::terminate, from a destructor). So a finished call (its work, which holds the output
// tensors, and its closure, which holds the inputs) is kept until the next push(), which frees
// it on the caller's thread.
void RunQueue::loop() {
  c10::AutoGradMode no_grad(false);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return !items_.empty() && !busy_; });
      item = std::move(items_.front());
      items_.pop_front();
      busy_ = true;
    }
    const std::exception_ptr error = run_catching(item.run);
    release();
    item.work->complete(error);
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.push_back(std::move(item));
  }
}

// Wakes the worker only when something was queued meanwhile: a wake-up for nothing costs a
// context switch per call.
void RunQueue::release() {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    queued = !items_.empty();
  }
  if (queued) cv_.notify_one();
}

}  // namespace ddl::python
