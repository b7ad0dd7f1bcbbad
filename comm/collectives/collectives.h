#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/transport/link.h"

namespace ddl::comm {

struct Signature;  // signature.h

/// Element types of the collectives (ddl.h's DDL_FLOAT32 ... in the same order). kBool is one
/// byte: 0 is false, anything else true; a reduction over two or more ranks writes 0 or 1 (one
/// rank's result is its input).
enum class DataType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUint8,
  kInt8,
  kInt16,
  kUint16,
  kBool
};
/// The number of DataType values (each below it is one).
inline constexpr int kDataTypes = static_cast<int>(DataType::kBool) + 1;
/// Reductions (ddl.h's DDL_SUM ... in the same order). kAvg sums, then divides by the number
/// of ranks (integer types: the wrapped sum, divided truncating toward zero). kBand, kBor and
/// kBxor are bitwise, on the integer types and kBool only. On kBool, kSum and kMax are a
/// logical or, kProd and kMin a logical and; kAvg is refused (reduction_error()).
enum class ReduceOp { kSum, kAvg, kMin, kMax, kProd, kBand, kBor, kBxor };
/// The number of ReduceOp values.
inline constexpr int kReduceOps = static_cast<int>(ReduceOp::kBxor) + 1;

/// Bytes per element.
size_t type_size(DataType type);
/// "float32", "bfloat16", ...; "sum", "avg", ...
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
/// Whether `type` is float32, float64, float16 or bfloat16.
bool is_floating(DataType type);
/// Why `op` does not reduce `type` ("" when it does): the bitwise ops on a floating type, avg
/// on bool. The caller prefixes the collective's name.
std::string reduction_error(DataType type, ReduceOp op);

/// dst[i] = op(dst[i], src[i]) for `count` elements (kAvg reduces as kSum). float16 and
/// bfloat16 are widened to float, reduced, and rounded to nearest even. Vectorised where the
/// compiler can.
void reduce_into(void* dst, const void* src, size_t count, DataType type, ReduceOp op);
/// dst[i] = op(a[i], b[i]): the bits of copying a into dst and then reduce_into(dst, b), in one
/// pass. dst is exactly a, exactly b, or overlaps neither (an in-place reduction).
void reduce_of(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);
/// buf[i] /= divisor, for kAvg's last step.
void divide(void* buf, size_t count, DataType type, int divisor);
/// Element `i` of `buf` as a double (float16 and bfloat16 widened exactly, bool as its byte).
double element_value(const void* buf, size_t i, DataType type);
/// Whether float16 converts through F16C (the CPU has it). set_f16c(false) makes it convert
/// with the scalar code (the same bits: tests compare the two); returns the previous setting.
bool uses_f16c();
bool set_f16c(bool on);

/// The ranks one algorithm runs over, in ring order, with a link to each member: a ring of one
/// dimension, or the whole job. Built by the communicator from its links.
class Group {
 public:
  /// `members` are global ranks in ring order; `self` is this rank's index in them; `link`
  /// gives the Link to a member's global rank (never called for self).
  Group(std::vector<int> members, int self, std::function<transport::Link&(int global_rank)> link,
        std::chrono::milliseconds timeout)
      : members_(std::move(members)), self_(self), link_(std::move(link)), timeout_(timeout) {}

  int size() const { return static_cast<int>(members_.size()); }
  int rank() const { return self_; }  ///< this rank's index in the group
  int global(int index) const { return members_[index]; }
  /// The link to member `index` (0..size-1, not rank()).
  transport::Link& link(int index) const { return link_(members_[index]); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// How long a transfer of this group may make no progress before it fails.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  std::vector<int> members_;
  int self_;
  std::function<transport::Link&(int)> link_;
  std::chrono::milliseconds timeout_;
};

/// The boundaries of `count` elements cut into `parts` nearly equal chunks: chunk i is
/// [offsets[i], offsets[i+1]); the first count % parts chunks have one more element.
std::vector<size_t> partition(size_t count, int parts);

/// The sub-rings of a ring of prod(factors) members (ring_factors, comm/mode.h) as seen from
/// the member at `position`: for each factor k, innermost first, the positions of the members
/// of this member's k-th sub-ring in its order. A position is read as mixed-radix digits,
/// innermost first (position = d0 + f0 (d1 + f1 (d2 + ...))); sub-ring k holds the members
/// whose digits differ only in digit k. So sub-ring 0 is a run of f0 neighbours of the ring and
/// every member's sub-rings meet those of its peers as the dimensions of multi_dim_allreduce
/// must. sub_ring_positions(6, 4, {3, 2}) = {{3, 4, 5}, {1, 4}}. Throws std::invalid_argument
/// unless the factors are at least 1, multiply to `size`, and 0 <= position < size.
std::vector<std::vector<int>> sub_ring_positions(int size, int position,
                                                 std::span<const int> factors);

// The algorithms. All are in place on `buf` (out of place is a copy first, done by the caller),
// work for any count including 0 and counts not divisible by the group size, and give bitwise
// identical results on every member (each element is reduced in one fixed order).
// Each throws transport::TransportError naming the peer that failed.

/// Ring allreduce: reduce-scatter then allgather around the ring (2(n-1) steps), each chunk
/// pipelined in slices so sending and reducing overlap.
void ring_allreduce(const Group& g, void* buf, size_t count, DataType type, ReduceOp op);
/// Recursive doubling (non-powers of two fold the extra ranks in first): log2(n) steps of the
/// whole buffer; for small messages. With `sig`, every message also carries the sender's
/// verdict on the members' signatures (signature.h) and the call throws MismatchError on every
/// member when they differ (`buf` is then left as it was); members may then pass different
/// counts.
void recursive_doubling_allreduce(const Group& g, void* buf, size_t count, DataType type,
                                  ReduceOp op, const Signature* sig = nullptr);
/// Ring reduce-scatter: afterwards member i holds the reduced chunk i of partition(count, n)
/// at its place in `buf` (the rest of `buf` is scratch).
void ring_reduce_scatter(const Group& g, void* buf, size_t count, DataType type, ReduceOp op);
/// Ring allgather: member i contributes chunk i of partition(count, n) (already at its place
/// in `buf`); afterwards every member holds all of `buf`.
void ring_allgather(const Group& g, void* buf, size_t count, DataType type);
/// Broadcast of `bytes` from member `root` (pipelined along the ring).
void ring_broadcast(const Group& g, void* buf, size_t bytes, int root);
/// Broadcast of `bytes` from member `root` over recursive doubling's pattern, checking `sig`
/// in the same messages (a MismatchError on every member when the members' differ): log2(n)
/// steps, for small messages.
void recursive_doubling_broadcast(const Group& g, void* buf, size_t bytes, int root,
                                  const Signature& sig);
/// Pairwise exchange (alltoall): member i sends send[j] to member j and receives recv[j] from
/// it, for every j (its own block is copied); the sizes must agree pairwise (recv[j] on member
/// i is as long as send[i] on member j). n-1 steps, step s sending to member i+s and receiving
/// from member i-s at once; empty blocks touch no link. send and recv must not overlap.
void pairwise_alltoall(const Group& g, std::span<const std::span<const std::byte>> send,
                       std::span<const std::span<std::byte>> recv);

}  // namespace ddl::comm
