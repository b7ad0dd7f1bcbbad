// ProcessGroupDdl: the torch.distributed backend "ddl" over libddl (the extension ddl._torch_pg;
// registered in ddlrun's ranks by ddl/_site/sitecustomize.py, and by `import ddl.torch`). One
// source for both torch generations: on torch 1.x a backend is a c10d::ProcessGroup; on 2.x it
// is a c10d::Backend, which torch's own ProcessGroup holds for the device types the backend was
// registered for (TorchBackend below; DDL_TORCH2 marks what only 2.x has).
//
// How it works: a call checks its tensors on the caller's thread (one device, one supported
// dtype, the sizes the collective needs) and throws c10::Error for a user mistake; otherwise it
// hands the call to a RunQueue (run_queue.h) and returns a WorkDdl. Collectives of every group
// share one queue, run in issue order, so every rank calls libddl in the order the program
// issued them (libddl's rule); small ones run inline on the caller's thread when that queue is
// idle. Messages (send, recv) run on a queue per direction and peer, beside the collectives.
// A group is libddl's world group or one made by ddl_group_create (new_group: any subset of the
// ranks, several at once), its ranks and roots group ranks. A contiguous tensor is handed to libddl
// as it is (zero-copy); any other is copied to a contiguous one and back. When a collective ends
// the worker completes its WorkDdl: wait() returns (or rethrows the runtime's error, a ddl::Error
// whose text is libddl's message) and its Future (what DistributedDataParallel's reducer and
// comm hooks wait on) holds the output tensors or the error. CUDA tensors go to libddl too (it
// sends GPU buffers through NCCL) when libddl was built with its NCCL path; the caller's stream
// is synchronised before the collective is queued, the worker's around each libddl call.
#pragma once

#include <torch/version.h>

#include <functional>
#include <string>
#include <vector>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define DDL_TORCH2 1
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define DDL_TORCH2 0
#endif
#include <atomic>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ddl/ddl.h"

namespace ddl::python {

#if DDL_TORCH2
using TorchBackend = c10d::Backend;
#else
using TorchBackend = c10d::ProcessGroup;
#endif

class RunQueue;

/// One queued collective: done (successfully or not) once the worker has run it.
class WorkDdl : public c10d::Work {
 public:
  WorkDdl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  /// A receive from any source: the group rank of the sender (once complete). Any other work:
  /// torch's refusal.
  int sourceRank() const override;

  /// Called by the worker: marks the work done and completes the future (with `error`, if any).
  void complete(std::exception_ptr error);
  /// Where a receive from any source puts its sender's group rank (see sourceRank()).
  void set_source(std::shared_ptr<const std::atomic<int>> source) { source_ = std::move(source); }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<const std::atomic<int>> source_;
};

/// The "ddl" backend: tensors through libddl (which must be initialised, by ddl.init()).
class ProcessGroupDdl : public TorchBackend {
 public:
  /// The group of job ranks `ranks` (every rank when empty), of which this process is group rank
  /// `rank` of `size`; a subgroup is made with ddl_group_create, in the collectives' order, and
  /// lives until ddl_finalize. Throws c10::Error when libddl is not initialised or the ranks do
  /// not match, ddl::Error when libddl cannot make the group.
  /// `store` (torch's store of the group; may be null) is where monitoredBarrier meets.
  /// `timeout` > 0 (seconds) gives the group's collectives a timeout of their own
  /// (ddl_group_set_timeout; a group of every rank is then a libddl group of its own, not the
  /// world group); 0 leaves them libddl's DDL_TIMEOUT. A call that times out throws "Timed out".
  ProcessGroupDdl(int rank, int size, std::vector<int> ranks, c10::intrusive_ptr<c10d::Store> store,
                  double timeout = 0);

  const std::string getBackendName() const override { return "ddl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  /// One fused libddl allreduce_n when every tensor is contiguous and of one dtype.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  /// An allreduce whose result only the root keeps.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  /// An allgather whose parts only the root keeps (in outputs[0], empty on the other ranks).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  /// A broadcast of the root's inputs[0] (all parts; empty on the other ranks), each rank
  /// keeping its own part.
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  /// all_to_all_single: equal blocks, or blocks of `outputSplitSizes`/`inputSplitSizes` rows.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& outputTensor, at::Tensor& inputTensor,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  /// all_to_all: input i goes to group rank i, output i comes from it (any sizes that agree).
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputTensors,
                                          std::vector<at::Tensor>& inputTensors,
                                          const c10d::AllToAllOptions& opts) override;
  /// send/isend and recv/irecv (group ranks, torch's tags): libddl's messages.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  /// recv/irecv with no src: the first message under `tag` from whichever other rank of the
  /// group sends one (ddl_group_recv_any); the work's sourceRank() is its sender. These
  /// receives run on a queue of their own.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  /// outputTensorLists[r][i] takes group rank r's inputTensors[i] (any dtypes): one allgather of
  /// every input's bytes.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputTensorLists,
      std::vector<at::Tensor>& inputTensors, const c10d::AllgatherOptions& opts) override;
  /// torch's monitored_barrier through the group's store (monitored_barrier.cc): rank 0 waits
  /// for every other rank within opts.timeout and throws torch's texts naming those that did
  /// not come; the others wait for rank 0's release.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override;

#if DDL_TORCH2
  /// all_gather_into_tensor and reduce_scatter_tensor of several tensors at once (torch's
  /// _coalescing_manager): one call per pair, in order.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  /// torch's _coalescing_manager: the calls between start and end run as issued (there is
  /// nothing to batch); end's work completes once every collective issued before it has.
  void startCoalescing() override {}
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  /// Sequence numbers (TORCH_DISTRIBUTED_DEBUG=DETAIL's checks): every rank starts the group
  /// at 0 and counts the collectives it issues, so the ranks agree while their calls match.
  void setSequenceNumberForGroup() override {
    sequence_ = 0;
  }
  uint64_t getSequenceNumberForGroup() override {
    return sequence_;
  }

  /// torch's split_group (ProcessGroup::splitGroup): a group splits into libddl groups.
  bool supportsSplitting() const override {
    return true;
  }
  /// The group of this group's ranks `ranks` (group ranks; torch's split_group gives every
  /// rank the split it is in), made as new_group makes one (every member makes it, in the
  /// collectives' order), with opts->timeout as its own unless it is torch's default; nullptr
  /// on a rank that `ranks` leaves out.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  /// The name "ddl" and the group's own timeout (torch's default when it has none), which
  /// split_group copies for the groups it splits off.
  c10::intrusive_ptr<Options> getBackendOptions() override;
#endif

 private:
  /// Hands `run` (which calls libddl and throws ddl::Error on failure) to the collectives'
  /// queue, or to `queue` when given.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void()> run, RunQueue* queue = nullptr);

  /// allreduce of a sparse COO tensor (SUM): every rank's entries gathered, then summed.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(at::Tensor& tensor, const c10d::ReduceOp& op);

  ddl_group_t group_ = nullptr;  ///< libddl's group (ddl_group_world() for every rank)
  double timeout_ = 0;           ///< the group's own timeout in seconds (0: DDL_TIMEOUT)
  c10::intrusive_ptr<c10d::Store> store_ddl_;  ///< monitoredBarrier's meeting place
  uint64_t barrier_rounds_ = 0;                ///< monitoredBarrier calls so far
  std::atomic<uint64_t> sequence_{0};          ///< collectives issued (sequence number)
};

#if DDL_TORCH2
/// The torch ProcessGroup of a ddl group (torch 2.x), which ddl/torch.py's creator returns in
/// place of the bare backend: torch's own would call itself "custom" and refuse sequence
/// numbers. It holds `backend` (ProcessGroupDdl, or torch's debug wrapper around it) for the
/// devices cpu and cuda.
class GroupDdl : public c10d::ProcessGroup {
 public:
  GroupDdl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
           const c10::intrusive_ptr<c10d::Backend>& backend);

  const std::string getBackendName() const override { return "ddl"; }
  /// torch's split, the group it makes held as a GroupDdl (so it is named "ddl" too).
  c10::intrusive_ptr<c10d::ProcessGroup> splitGroup(
      const std::vector<int>& ranks, const std::optional<std::chrono::milliseconds>& timeout,
      const std::optional<c10::intrusive_ptr<c10d::Backend::Options>>& opts,
      const std::optional<std::string>& name, const std::optional<std::string>& groupDesc,
      const std::optional<std::vector<c10::Device>>& devices = std::nullopt) override;
  void setSequenceNumberForGroup() override { getDefaultBackend()->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override {
    return getDefaultBackend()->getSequenceNumberForGroup();
  }
};
#endif

}  // namespace ddl::python
