// RunQueue: where ProcessGroupDdl's calls run. One queue holds the collectives of every group in
// issue order, so every rank calls libddl in the same order; point-to-point messages have a
// queue per direction and peer (they use links of their own in libddl), so a send waiting for
// its receiver never holds up a receive, nor one peer another.
//
// How it works: each queue has a worker thread that runs its calls in order. A small collective
// issued while its queue is empty and idle runs at once on the calling thread instead (no
// hand-off to the worker and back: two thread wake-ups, most of a small all_reduce's time), so
// its work is complete when returned. Whoever runs a call holds the queue's `busy_`, so a call
// issued meanwhile waits behind it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "process_group_ddl.h"

namespace ddl::python {

class RunQueue {
 public:
  /// The queue of every group's collectives.
  static RunQueue& collectives();
  /// The queue of messages to (`send`) or from job rank `peer`, or (kAnySource) of the
  /// receives from any source.
  static RunQueue& messages(bool send, int peer);
  static constexpr int kAnySource = -1;

  /// Whether a call of `type` on `outputs` may run inline: a collective that moves data (not
  /// barrier, which waits for late ranks, nor messages or alltoall, which wait for peers) on
  /// CPU or CUDA tensors of at most $DDL_INLINE_BYTES bytes (default 64 KiB; 0: never).
  static bool inlinable(c10d::OpType type, const std::vector<at::Tensor>& outputs);

  /// Runs `run` on this thread and completes `work` when nothing is queued or running here
  /// (true); otherwise does nothing (false).
  bool run_inline(WorkDdl& work, const std::function<void()>& run);

  /// Queues `run` for the worker, which completes `work` with what it threw, if anything.
  void push(c10::intrusive_ptr<WorkDdl> work, std::function<void()> run);

 private:
  struct Item {
    c10::intrusive_ptr<WorkDdl> work;
    std::function<void()> run;
  };

  RunQueue();
  void loop();
  void release();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool busy_ = false;           ///< a call is running (on the worker or inline)
  std::vector<Item> finished_;  ///< run, not yet freed (see push())
};

}  // namespace ddl::python
