#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/signature.h"
#include "comm/core/calls.h"

namespace ddl::comm {

class Communicator;

/// A communicator over a subset of the job's ranks (Communicator::create_group()): the same
/// collectives on its members only, with group ranks for roots and peers.
///
/// A group runs its collectives over its own Group of the communicator's links (recursive
/// doubling for small calls, rings for large ones, pairwise exchange for alltoall; results
/// bitwise identical on every member) under the communicator's collective lock, so a process
/// runs one collective at a time whatever its group. Its calls are numbered on their own and
/// their signatures carry the group's id(), so calls of two groups that share ranks never
/// match each other: a member that calls another group's collective (or another collective)
/// fails, with every member, with MismatchError, which like the job's makes the communicator
/// and all its groups refuse every later call. Messages (send, recv) use the communicator's
/// message links with the group's id beside the tag. GPU buffers are refused.
class Subgroup {
 public:
  /// Made by Communicator::create_group() (nothing is sent): `members` are job ranks, `self`
  /// this rank's index.
  Subgroup(Communicator& comm, std::vector<int> members, int self, uint32_t id);

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  int global(int group_rank) const { return group_.global(group_rank); }
  /// What tells the group's calls and messages apart from other groups' (never 0).
  uint32_t id() const { return id_; }
  /// The group's own timeout: its collectives fail with TransportError once a transfer has
  /// made no progress for `timeout` (the communicator's DDL_TIMEOUT until this is called).
  /// Local; messages keep the communicator's timeout.
  void set_timeout(std::chrono::milliseconds timeout);

  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  void allreduce_n(void* const* buffers, const size_t* counts, size_t n, DataType type,
                   ReduceOp op);
  void broadcast(void* buf, size_t count, DataType type, int root);
  void allgather(const void* send, void* recv, size_t count, DataType type);
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  void barrier();
  void alltoall(const void* send, void* recv, size_t count, DataType type);
  void alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                 const size_t* recv_counts, const size_t* recv_displs, DataType type);
  void send(const void* buf, size_t count, DataType type, int peer, int tag);
  void recv(void* buf, size_t count, DataType type, int peer, int tag);
  /// The first message under the group's `tag` from whichever other member sends one; returns
  /// its group rank (Communicator::recv_any).
  int recv_any(void* buf, size_t count, DataType type, int tag);

 private:
  /// Runs one call under the communicator's lock, numbered by this group.
  template <typename Body>
  void collective(Body&& body);
  Signature signature(CollectiveKind kind, size_t count, DataType type, ReduceOp op,
                      int root = -1) const;
  /// Throws ArgumentError when a buffer is GPU memory.
  void host_only(const char* what, std::span<const void* const> buffers) const;
  /// In place; `sig` is checked on the way.
  void allreduce_checked(void* buf, size_t count, DataType type, ReduceOp op, Signature sig);
  /// check_signatures() among the members (none in a group of one).
  void verify(const Signature& sig);
  /// verify(), as the shared steps of calls.h take it.
  Verify verifier() {
    return [this](const Signature& sig) { verify(sig); };
  }
  /// The job rank of group rank `peer`; throws ArgumentError naming `what` when out of range.
  int peer_rank(const char* what, int peer) const;

  Communicator& comm_;
  Group group_;
  uint32_t id_;
  uint64_t seq_ = 0;  ///< calls made, under the communicator's collective lock
};

}  // namespace ddl::comm
