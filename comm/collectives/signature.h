#pragma once

// What each rank called, compared across the ranks at the start of every collective (see
// signature.cc for how, and recursive_doubling.cc for the messages that carry it).

#include <cstdint>
#include <span>
#include <string>

#include "base/check.h"
#include "comm/collectives/collectives.h"

namespace ddl::comm {

/// The ranks did not all make the same call: what() names two of them and their calls, e.g.
/// "collective mismatch: rank 0 called allreduce(count=10, float32, sum) #3 but rank 1 called
/// allreduce(count=11, float32, sum) #3". Thrown on every member of the group.
using MismatchError = base::Error<struct MismatchErrorTag>;

/// The collective a Signature describes.
enum class CollectiveKind : uint8_t {
  kAllreduce,
  kAllreduceN,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kBarrier,
  kAlltoall,
  kAlltoallv
};

/// One rank's collective call, as every rank must agree on it. Plain bytes on the wire (no
/// padding), so two signatures are equal exactly when their bytes are.
struct Signature {
  uint64_t seq = 0;  ///< the call's number on its communicator, counting from 1
  /// Elements (allreduce_n: of all buffers; reduce_scatter, alltoall: per rank; alltoallv:
  /// what this rank expects from `root` when that differs).
  uint64_t count = 0;
  /// allreduce_n: a hash of the buffers' counts and the bucket size; alltoallv: what `root`
  /// sends this rank when that differs.
  uint64_t layout = 0;
  uint32_t buffers = 0;  ///< allreduce_n: the number of buffers
  int32_t root = -1;     ///< broadcast: the root; alltoallv: the rank whose count differs
  CollectiveKind kind = CollectiveKind::kBarrier;
  uint8_t type = 0;  ///< DataType
  uint8_t op = 0;    ///< ReduceOp
  /// How the rank runs the call (algorithms.h: kRouteDefault, kRouteDevice, route_of()): ranks
  /// that chose differently (DDL_ALGO, DDL_SMALL_BYTES set differently, GPU memory on one rank
  /// and host memory on another) would not meet either.
  uint8_t route = 0;
  uint32_t group = 0;  ///< the group's id (Subgroup::id()); 0 for the whole job

  bool operator==(const Signature&) const = default;
};
static_assert(sizeof(Signature) == 40, "a Signature is sent as its bytes");

/// A signature with those fields (route kRouteDefault, group 0).
Signature make_signature(uint64_t seq, CollectiveKind kind, size_t count, DataType type,
                         ReduceOp op, int root = -1);

/// "allreduce(count=10, float32, sum) #3", "broadcast(count=4, int32, root=1) #7",
/// "barrier() #2", "barrier() #2 in group 0a1b2c3d"; `detailed` adds the route and
/// allreduce_n's layout hash, which tell apart calls whose short texts are
/// the same.
std::string describe(const Signature& s, bool detailed = false);

/// What a set of ranks called, summarised so that summaries merge: the lowest rank's call and
/// the lowest rank whose call differs from it. merge() depends only on the union of the ranks
/// summarised (merging overlapping sets is harmless), so any pattern that carries every
/// rank's summary to every rank leaves the same verdict everywhere.
struct Verdict {
  int32_t first_rank = -1;  ///< the lowest rank heard from
  int32_t other_rank = -1;  ///< the lowest rank whose call differs from first_rank's; -1: none
  Signature first;
  Signature other;

  /// A verdict over one rank.
  static Verdict of(int rank, const Signature& s);
  void merge(const Verdict& v);
  bool mismatch() const { return other_rank >= 0; }
  /// MismatchError's text (call only when mismatch()).
  std::string message() const;
};
static_assert(sizeof(Verdict) == 88, "a Verdict is sent as its bytes");

/// Compares `mine` across every member of `g` (recursive doubling's messages without payload:
/// log2 steps, a barrier too) and throws MismatchError on every member when any differs.
void check_signatures(const Group& g, const Signature& mine);

}  // namespace ddl::comm
