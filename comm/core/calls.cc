// Steps shared by the job's calls and a group's (see calls.h).
//
// How it works: for_each_bucket() walks allreduce_n's buffers once, cutting buckets exactly as
// the signature's layout hash describes them, so ranks whose cuts would differ have already
// failed the check. alltoall sends block j of `send` to member j by pairwise exchange
// (collectives/alltoall.cc). alltoallv first runs the same exchange on the counts (8 bytes per
// pair), so each member learns what every other will send it before any data moves, and the
// second signature check turns one pair's disagreement into the same MismatchError on every
// member instead of a hang or a short read.

#include "comm/core/calls.h"

#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/core/communicator.h"

namespace ddl::comm {

void check_reduction(const char* what, DataType type, ReduceOp op) {
  if (std::string why = reduction_error(type, op); !why.empty()) {
    throw ArgumentError(std::string(what) + ": " + why);
  }
}

void check_not_null(const char* what, size_t count, const void* send, const void* recv) {
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    throw ArgumentError(std::string(what) + ": a null buffer");
  }
}

void check_buffers(void* const* buffers, const size_t* counts, size_t n) {
  if (n > 0 && (buffers == nullptr || counts == nullptr)) {
    throw ArgumentError("allreduce_n: null buffer or count list");
  }
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] > 0 && buffers[i] == nullptr) {
      throw ArgumentError("allreduce_n: buffer " + std::to_string(i) + " is null");
    }
  }
}

void for_each_bucket(void* const* buffers, const size_t* counts, size_t n, size_t ts,
                     size_t bucket_elems, const std::function<void(void*, size_t)>& reduce) {
  std::vector<std::byte> fused;
  size_t i = 0;
  while (i < n) {
    if (counts[i] >= bucket_elems) {
      reduce(buffers[i], counts[i]);
      ++i;
      continue;
    }
    size_t j = i, total = 0;
    while (j < n && counts[j] < bucket_elems && total + counts[j] <= bucket_elems)
      total += counts[j++];
    fused.resize(total * ts);
    size_t off = 0;
    for (size_t k = i; k < j; ++k) {
      if (counts[k] > 0) std::memcpy(fused.data() + off, buffers[k], counts[k] * ts);
      off += counts[k] * ts;
    }
    reduce(fused.data(), total);
    off = 0;
    for (size_t k = i; k < j; ++k) {
      if (counts[k] > 0) std::memcpy(buffers[k], fused.data() + off, counts[k] * ts);
      off += counts[k] * ts;
    }
    i = j;
  }
}

void describe_buffers(Signature& sig, const size_t* counts, size_t n, size_t bucket_elems) {
  // Ranks that cut the same total differently would reduce one buffer's elements into
  // another's.
  uint64_t hash = 0xcbf29ce484222325u, total = 0;
  auto mix = [&hash](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      hash ^= (v >> (8 * b)) & 0xff;
      hash *= 0x100000001b3u;
    }
  };
  for (size_t k = 0; k < n; ++k) {
    mix(counts[k]);
    total += counts[k];
  }
  mix(bucket_elems);
  sig.count = total;
  sig.buffers = static_cast<uint32_t>(n);
  sig.layout = hash;
}

void broadcast_call(const Group& g, const Verify& verify, Signature sig, void* buf, size_t count,
                    DataType type, int root, size_t small_bytes) {
  const size_t bytes = count * type_size(type);
  if (g.size() > 1 && count > 0 && bytes < small_bytes) {
    sig.route = route_of("rd");
    recursive_doubling_broadcast(g, buf, bytes, root, sig);
    return;
  }
  verify(sig);
  if (g.size() > 1 && count > 0) ring_broadcast(g, buf, bytes, root);
}

void allgather_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                    void* recv, size_t count, DataType type) {
  verify(sig);
  const size_t bytes = count * type_size(type);
  std::byte* mine = static_cast<std::byte*>(recv) + bytes * g.rank();
  if (count > 0 && mine != send) std::memmove(mine, send, bytes);
  if (g.size() > 1 && count > 0) ring_allgather(g, recv, count * g.size(), type);
}

void reduce_scatter_call(const Group& g, const Verify& verify, const Signature& sig,
                         const void* send, void* recv, size_t recv_count, DataType type,
                         ReduceOp op) {
  verify(sig);
  if (recv_count == 0) return;
  const size_t bytes = recv_count * type_size(type);
  std::vector<std::byte> scratch(bytes * g.size());
  std::memcpy(scratch.data(), send, scratch.size());
  if (g.size() > 1) ring_reduce_scatter(g, scratch.data(), recv_count * g.size(), type, op);
  std::memcpy(recv, scratch.data() + bytes * g.rank(), bytes);
}

namespace {

/// pairwise_alltoall over `g` of the blocks `blocks(j)` gives for each member j: {what goes to
/// it, where its block comes in}.
template <typename Blocks>
void exchange_blocks(const Group& g, Blocks&& blocks) {
  const size_t n = static_cast<size_t>(g.size());
  std::vector<std::span<const std::byte>> out(n);
  std::vector<std::span<std::byte>> in(n);
  for (size_t j = 0; j < n; ++j)
    std::tie(out[j], in[j]) = blocks(j);
  pairwise_alltoall(g, out, in);
}

}  // namespace

void alltoall_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                   void* recv, size_t count, DataType type) {
  const size_t bytes = count * type_size(type);
  check_not_null("alltoall", count, send, recv);
  verify(sig);
  if (count == 0) return;
  exchange_blocks(g, [&](size_t j) {
    return std::pair{std::span(static_cast<const std::byte*>(send) + j * bytes, bytes),
                     std::span(static_cast<std::byte*>(recv) + j * bytes, bytes)};
  });
}

namespace {

/// Member j's block of `buf` (displacements and counts in elements).
template <typename Byte>
std::span<Byte> block(Byte* buf, const size_t* counts, const size_t* displs, size_t j, size_t ts) {
  if (counts[j] == 0) return {};
  return {buf + displs[j] * ts, counts[j] * ts};
}

/// Every member's count for this one, by pairwise exchange of `send_counts`.
std::vector<uint64_t> incoming_counts(const Group& g, const size_t* send_counts) {
  const size_t n = static_cast<size_t>(g.size());
  std::vector<uint64_t> mine(send_counts, send_counts + n), theirs(n);
  exchange_blocks(g, [&](size_t j) {
    return std::pair{std::as_bytes(std::span(&mine[j], 1)),
                     std::as_writable_bytes(std::span(&theirs[j], 1))};
  });
  return theirs;
}

}  // namespace

void alltoallv_call(const Group& g, const Verify& verify, const Signature& sig, const void* send,
                    const size_t* send_counts, const size_t* send_displs, void* recv,
                    const size_t* recv_counts, const size_t* recv_displs, DataType type) {
  if (send_counts == nullptr || send_displs == nullptr || recv_counts == nullptr ||
      recv_displs == nullptr) {
    throw ArgumentError("alltoallv: a null count or displacement array");
  }
  const size_t n = static_cast<size_t>(g.size()), ts = type_size(type);
  size_t sent = 0, received = 0;
  for (size_t j = 0; j < n; ++j) {
    sent += send_counts[j];
    received += recv_counts[j];
  }
  if ((sent > 0 && send == nullptr) || (received > 0 && recv == nullptr)) {
    throw ArgumentError("alltoallv: a null buffer");
  }
  verify(sig);
  const std::vector<uint64_t> theirs = incoming_counts(g, send_counts);
  Signature agreed = sig;
  for (size_t j = 0; j < n; ++j) {
    if (theirs[j] == recv_counts[j]) continue;
    agreed.root = g.global(static_cast<int>(j));
    agreed.count = recv_counts[j];
    agreed.layout = theirs[j];
    break;
  }
  verify(agreed);
  exchange_blocks(g, [&](size_t j) {
    return std::pair{block(static_cast<const std::byte*>(send), send_counts, send_displs, j, ts),
                     block(static_cast<std::byte*>(recv), recv_counts, recv_displs, j, ts)};
  });
}

}  // namespace ddl::comm
