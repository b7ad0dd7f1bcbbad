#pragma once

// Steps shared by the job's calls (Communicator) and a group's (Subgroup): the check of a
// reduction's type and op, allreduce_n's buckets, the host-memory broadcast, allgather and
// reduce-scatter over a Group, and alltoall with its checks.

#include <cstdint>
#include <functional>

#include "comm/collectives/collectives.h"
#include "comm/collectives/signature.h"

namespace ddl::comm {

/// Compares a signature across the ranks of a call (throws MismatchError on all of them).
using Verify = std::function<void(const Signature&)>;

/// Throws ArgumentError "<what>: <why>" when `op` does not reduce `type` (reduction_error():
/// a bitwise op on a floating type, avg on bool), before any data moves.
void check_reduction(const char* what, DataType type, ReduceOp op);
/// Throws ArgumentError "<what>: a null buffer" when `count` > 0 and `send` or `recv` is null.
void check_not_null(const char* what, size_t count, const void* send, const void* recv);
/// allreduce_n's arguments: throws ArgumentError for a null list or a null buffer of elements.
void check_buffers(void* const* buffers, const size_t* counts, size_t n);
/// allreduce_n's fusion: consecutive buffers of fewer than `bucket_elems` elements are copied
/// into one bucket of at most `bucket_elems`, reduced by `reduce(bucket, count)` and copied back;
/// a larger buffer is reduced alone, in place. Every rank cuts the same buckets from the same
/// counts.
void for_each_bucket(void* const* buffers, const size_t* counts, size_t n, size_t type_bytes,
                     size_t bucket_elems, const std::function<void(void*, size_t)>& reduce);
/// allreduce_n's signature fields: the total count, the number of buffers and the layout hash
/// (FNV-1a over the counts and the bucket size).
void describe_buffers(Signature& sig, const size_t* counts, size_t n, size_t bucket_elems);

/// broadcast over `g` on host memory: below `small_bytes` the data rides on the check's own
/// messages (recursive doubling, route "rd"), else `verify(sig)` and the pipelined ring.
void broadcast_call(const Group& g, const Verify& verify, Signature sig, void* buf, size_t count,
                    DataType type, int root, size_t small_bytes);
/// allgather over `g` on host memory: `verify(sig)`, this member's block of `recv` from `send`
/// (unless it is already there), then the ring.
void allgather_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                    void* recv, size_t count, DataType type);
/// reduce_scatter over `g` on host memory: `verify(sig)`, then the ring on a copy of `send`, of
/// which this member's block goes to `recv`.
void reduce_scatter_call(const Group& g, const Verify& verify, const Signature& sig,
                         const void* send, void* recv, size_t recv_count, DataType type,
                         ReduceOp op);
/// alltoall over `g` (`count` elements to and from each member) once `verify(sig)` passed.
void alltoall_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                   void* recv, size_t count, DataType type);
/// alltoallv over `g`: `verify(sig)`, then every member tells every other how much it sends,
/// then a second verify() whose signature names the first member (by job rank) whose count
/// differs from what this one expects, so that a disagreement fails on every member; then the
/// data. Arguments as ddl_alltoallv's; throws ArgumentError for null arrays.
void alltoallv_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                    const size_t* send_counts, const size_t* send_displs, void* recv,
                    const size_t* recv_counts, const size_t* recv_displs, DataType type);

}  // namespace ddl::comm
