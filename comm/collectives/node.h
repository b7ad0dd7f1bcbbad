#pragma once
// Collectives among the ranks of one host, directly in shared memory (see node.cc).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/dimension.h"
#include "comm/collectives/shared_buffer.h"
#include "comm/collectives/signature.h"

namespace ddl::comm {

/// The streaming threshold kStreamAuto stands for with `members` ranks: the smallest S with
/// 2 members S > the last-level cache (sysfs' index3 of cpu0; 32 MiB where it says nothing).
size_t auto_stream_bytes(int members);

/// The slot size kChunkAuto stands for: one core's L2 cache (sysfs' level-2 cache of cpu0),
/// within 256 KiB .. 4 MiB; 256 KiB where sysfs says nothing.
size_t auto_chunk_bytes();

/// One rank of a node group.
struct NodeMember {
  int rank = 0;      ///< global rank
  int pid = 0;       ///< its process (ranks that are threads of one process share it)
  std::string name;  ///< "rank 3 (node2)", for messages
};

struct NodeOptions {
  std::string job = "ddl";  ///< names the segment
  /// Bytes each step moves through a member's slot (DDL_SHM_CHUNK_BYTES): pieces of the
  /// buffer small enough to stay in cache between the copy in, the reduction and the copy out.
  /// kChunkAuto: one core's L2 (auto_chunk_bytes), the fewest steps (each a wait) whose slot
  /// still stays in the writer's L2 while the others read it. Member 0's value counts.
  size_t chunk_bytes = kChunkAuto;
  static constexpr size_t kChunkAuto = SIZE_MAX;
  /// Allreduces of at most this many bytes (DDL_SHM_SMALL_BYTES) take one step: every member
  /// copies its whole input in and reduces all of it itself.
  size_t small_bytes = 8 * 1024;
  /// Allreduces of at least this many bytes (DDL_SHM_CMA_BYTES; 0: never) read the peers'
  /// buffers where they lie, through cross-memory attach (process_vm_readv), when every
  /// member may: no copy through the slots (node_cma.cc; off by default: measured slower).
  size_t cma_bytes = 0;
  /// Allreduces, allgathers and broadcasts of at least this many bytes (DDL_SHM_STREAM_BYTES;
  /// 0: never) write their output with streaming stores (node_copy.h), which cost no read
  /// for ownership but leave the output out of the cache. kStreamAuto: from the size where
  /// the members' inputs and outputs (2 n S) outgrow the last-level cache (auto_stream_bytes).
  size_t stream_bytes = kStreamAuto;
  static constexpr size_t kStreamAuto = SIZE_MAX;
  std::chrono::milliseconds timeout{60'000};  ///< no progress for this long: TransportError
};

namespace node {
struct Segment;  // node_segment.h
struct Control;
}  // namespace node

/// The ranks of one host, with one shared segment: a control line per member (step counters
/// and the call's signature) and two slots per member that peers read directly (node.cc says
/// how the collectives use them). Every member constructs it at the same time (member 0 makes
/// the segment) and calls the same collectives in the same order. Not thread-safe: one call
/// at a time. Collectives throw transport::TransportError naming a member that exited or
/// made no progress within the timeout, and MismatchError (on every member) when `sig` is
/// given and the members' differ.
class NodeGroup {
 public:
  NodeGroup(std::vector<NodeMember> members, int self, NodeOptions options);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  int rank() const { return self_; }
  /// Whether large allreduces read the peers' buffers directly (cma_bytes, and every member
  /// may read every other's memory).
  bool reads_peers() const { return cma_; }
  /// Whether every member can map every other's shared buffers (ddl_alloc): in-place
  /// allreduces on them then read and write the peers' buffers directly (node_shared.cc).
  bool maps_peers() const { return share_ok_; }
  /// Allreduces that took the single pass (every member's buffer shared), for tests.
  uint64_t single_passes() const { return single_passes_; }

  /// recv = op over the members' send (in place when send == recv).
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 const Signature* sig);
  /// recv (recv_count elements) = op over the members' block rank() of send (size() blocks).
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      const Signature* sig);
  /// recv (size() blocks of count) gets member i's send in block i.
  void allgather(const void* send, void* recv, size_t count, DataType type, const Signature* sig);
  /// `bytes` of member `root`'s buf to every member.
  void broadcast(void* buf, size_t bytes, int root, const Signature* sig);
  /// Returns once every member has entered; with `sig`, also compares the members' calls.
  void barrier(const Signature* sig);
  /// The Dimension steps, in place over partition(count, size()).
  void reduce_scatter_in_place(void* buf, size_t count, DataType type, ReduceOp op);
  void allgather_in_place(void* buf, size_t count, DataType type);

 private:
  struct Sweep;
  /// Returns once every member has mapped the segment; throws naming one that has not.
  void await_attached();
  /// Leaves the group: marks this member closed, unmaps, closes the pidfds.
  void release();
  /// A sweep from `in` to `out` with its reduction folded (kAvg sums, then divides by size()),
  /// pieces as large as the slots allow, and the call's signature; its layout is the caller's.
  Sweep sweep(const void* in, void* out, DataType type, ReduceOp op, const Signature* sig) const;
  /// Whether output of `bytes` is written with streaming stores (stream_bytes).
  bool streams(size_t bytes) const;
  void run(const Sweep& s);
  /// Step `piece`; true when it finished the whole call (every member's buffer shared).
  bool step(const Sweep& s, size_t piece);
  void copy_in(const Sweep& s, size_t piece);
  void reduce_piece(const Sweep& s, size_t piece);
  /// One block (c elements) of this member's piece reduced from src(0..n-1) in rank order;
  /// returns where the result lies: `last` when given (the slot the others collect from),
  /// else the accumulator.
  template <typename Src>
  std::byte* reduce_block(const Src& src, std::byte* last, size_t c, DataType type, ReduceOp op,
                          int divisor);
  /// Copies the others' pieces of step `at_step` (piece j) from their slots into the output.
  void gather_piece(const Sweep& s, size_t piece, uint64_t at_step);
  /// Whether every member can read every other's memory (decided together, see node_cma.cc).
  void probe_cma();
  /// Reads `bytes` at `addr` in member m's memory into `dst`; throws naming m.
  void cma_read(int m, void* dst, uint64_t addr, size_t bytes);
  void cma_allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                     const Signature* sig);
  /// Whether every member can map every other's shared buffers (decided together).
  void probe_share();
  /// Publishes a verdict in `field` of this member's control line (1 yes, 2 no) and returns
  /// whether every member's is yes; throws naming a member that exits or never answers.
  bool agree(std::atomic<uint32_t> node::Control::*field, bool mine);
  /// Step 0 of an allreduce sweep, after every `posted`: the members whose buffers are
  /// shared (direct_); when all are, runs the single pass and returns true.
  bool adopt_shared(const Sweep& s);
  /// Every member's slice reduced from the members' buffers straight into all of them.
  void single_pass(const Sweep& s);
  void small_allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                       const Signature* sig);
  void sig_only(const Signature* sig);
  /// Starts step `step_ + 1` once every member has finished the step that used this slot.
  void begin_step(const Signature* sig);
  std::byte* slot(int member, uint64_t step) const;
  enum Field { kPosted, kReduced, kDone };
  void publish(Field f, uint64_t value);
  /// Waits until every member's `f` has reached the current step; with `sig`, then compares
  /// the members' signatures of this step.
  void await_all(Field f, const Signature* sig);
  void check_signatures(const Signature& mine) const;
  /// Waits until member `m`'s `counter` has reached `value`, checking on `m` meanwhile.
  void wait_until(int m, const std::atomic<uint64_t>& counter, uint64_t value);
  /// Whether member `m`'s process has exited (never for a thread of this process).
  bool exited(int m) const;
  /// Throws when member `m` has exited or closed, or `since` is more than the timeout ago.
  void check_member(int m, std::chrono::steady_clock::time_point since);

  std::vector<NodeMember> members_;
  int self_;
  NodeOptions options_;
  node::Segment* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  std::string name_;                 ///< the segment's name, while it may still need unlinking
  std::vector<int> pidfds_;          ///< each member's process, -1 when ours or unavailable
  uint64_t step_ = 0;                ///< steps made; the same on every member between calls
  std::vector<uint64_t> done_seen_;  ///< each member's `done` as this one last read it
  /// The last one-wait step (a small allreduce, a signature check) in which every member's
  /// post was seen: a member that posted step s has read nothing of step s - 1's buffers since.
  uint64_t posts_seen_step_ = 0;
  unsigned spin_limit_ = 0;  ///< polls of a counter before sleeping on it
  std::vector<std::byte> scratch_;
  bool cma_ = false;                ///< every member can read every other's memory
  uint64_t cma_probe_ = 0;          ///< the word the others read to find out
  std::vector<std::byte> cma_tmp_;  ///< a peer's block of the reduction
  bool share_ok_ = false;           ///< every member can map every other's shared buffers
  PeerMaps peer_maps_;
  /// This allreduce's members whose (shared) buffers are read where they lie, else nullptr;
  /// direct_any_ says whether any is.
  std::vector<std::byte*> direct_;
  bool direct_any_ = false;
  uint64_t single_passes_ = 0;
};

/// A NodeGroup as one dimension of the multi-dimensional allreduce.
class NodeDimension : public Dimension {
 public:
  explicit NodeDimension(NodeGroup& group) : group_(group) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void reduce_scatter(void* buf, size_t count, DataType type, ReduceOp op) override {
    group_.reduce_scatter_in_place(buf, count, type, op);
  }
  void allgather(void* buf, size_t count, DataType type) override {
    group_.allgather_in_place(buf, count, type);
  }

 private:
  NodeGroup& group_;
};

}  // namespace ddl::comm
