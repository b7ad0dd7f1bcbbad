#pragma once
// One dimension of the multi-dimensional allreduce, whatever carries it: a ring of links
// (RingDimension, below) or the ranks of one host through shared memory (node/, NodeDimension).

#include <cstddef>
#include <span>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

/// The members of one dimension (the ranks that share this rank's index in every other
/// dimension) and the two steps the multi-dimensional allreduce needs of them. A region of
/// `count` elements is cut by partition(count, size()); member rank() owns chunk rank().
/// Every member must call the steps in the same order with the same count. One thread at a
/// time per Dimension; different Dimensions may run on different threads at once.
class Dimension {
 public:
  virtual ~Dimension() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  /// Afterwards this member's chunk of `buf` holds that chunk reduced over the members with
  /// `op` (kAvg divides by size()); the rest of `buf` is scratch.
  virtual void reduce_scatter(void* buf, size_t count, DataType type, ReduceOp op) = 0;
  /// Each member contributes its chunk (at its place in `buf`); afterwards every member holds
  /// all of `buf`.
  virtual void allgather(void* buf, size_t count, DataType type) = 0;
};

/// A Dimension over a Group's ring (ring_reduce_scatter, ring_allgather).
class RingDimension : public Dimension {
 public:
  explicit RingDimension(const Group& group) : group_(group) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void reduce_scatter(void* buf, size_t count, DataType type, ReduceOp op) override {
    ring_reduce_scatter(group_, buf, count, type, op);
  }
  void allgather(void* buf, size_t count, DataType type) override {
    ring_allgather(group_, buf, count, type);
  }

 private:
  const Group& group_;
};

/// The multi-dimensional allreduce of the PowerAI DDL paper (multi_dim.cc): reduce-scatter
/// along dims[0] (innermost), then along dims[1] on the piece this rank owns, ..., then
/// allgather back out from the outermost dimension to the innermost; pipelined in chunks of
/// `chunk_bytes` with one thread per dimension (0: one chunk, on this thread). The members of
/// each dimension must share this rank's index in every other one and pass the same count and
/// chunk_bytes. Throws the first dimension's error.
void multi_dim_allreduce(std::span<Dimension* const> dims, void* buf, size_t count, DataType type,
                         ReduceOp op, size_t chunk_bytes);

}  // namespace ddl::comm
