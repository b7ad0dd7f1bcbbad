// A group's collectives (see subgroup.h).
//
// How it works: the group is a collectives Group over the communicator's links, with members in
// the order of the list it was made from. Every call runs under the communicator's collective
// lock and its own number, and checks its signature (with the group's id) among the members
// before its data is used: a small allreduce or broadcast carries the check in its recursive
// doubling messages, every other call runs check_signatures() first. Large allreduces go round
// the ring, as do allgather, reduce-scatter and large broadcasts; alltoall is the pairwise
// exchange of calls.h. A group of one checks nothing and copies. Messages go through the
// communicator's mailbox under the group's id, so tags are per group.

#include "comm/core/subgroup.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "comm/core/calls.h"
#include "comm/core/communicator.h"

namespace ddl::comm {

Subgroup::Subgroup(Communicator& comm, std::vector<int> members, int self, uint32_t id)
    : comm_(comm),
      group_(
          std::move(members), self,
          [&comm](int peer) -> transport::Link& { return comm.link(peer); }, comm.options_.timeout),
      id_(id) {}

void Subgroup::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard lock(comm_.collective_mutex_);
  group_.set_timeout(timeout);
}

template <typename Body>
void Subgroup::collective(Body&& body) {
  comm_.collective(seq_, std::forward<Body>(body));
}

Signature Subgroup::signature(CollectiveKind kind, size_t count, DataType type, ReduceOp op,
                              int root) const {
  Signature s = make_signature(seq_, kind, count, type, op, root);
  s.group = id_;
  return s;
}

void Subgroup::host_only(const char* what, std::span<const void* const> buffers) const {
  if (comm_.on_device(what, buffers)) {
    throw ArgumentError(std::string(what) +
                        ": GPU memory is not supported on groups yet; pass host memory");
  }
}

void Subgroup::allreduce_checked(void* buf, size_t count, DataType type, ReduceOp op,
                                 Signature sig) {
  if (size() == 1) return;
  // A group has no topology of its own and no shared-memory group: the automatic choice among
  // the rows left (DDL_ALGO names the job's algorithm, not a group's).
  AllreduceShape shape;
  shape.bytes = count * type_size(type);
  shape.small_bytes = comm_.options_.small_bytes;
  const AllreduceSite site{group_, {}, nullptr, 0, verifier(), false};
  choose_allreduce(nullptr, shape).run(site, buf, count, type, op, &sig);
}

void Subgroup::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  collective([&] {
    if (count > 0 && (send == nullptr || recv == nullptr)) {
      throw ArgumentError("allreduce: a null buffer for " + std::to_string(count) + " elements");
    }
    check_reduction("allreduce", type, op);
    if (const void* b[] = {send, recv}; count > 0) host_only("allreduce", b);
    if (send != recv && count > 0) std::memmove(recv, send, count * type_size(type));
    allreduce_checked(recv, count, type, op,
                      signature(CollectiveKind::kAllreduce, count, type, op));
  });
}

void Subgroup::allreduce_n(void* const* buffers, const size_t* counts, size_t n, DataType type,
                           ReduceOp op) {
  collective([&] {
    check_buffers(buffers, counts, n);
    check_reduction("allreduce_n", type, op);
    host_only("allreduce_n", std::vector<const void*>(buffers, buffers + n));
    const size_t ts = type_size(type);
    const size_t bucket_elems = std::max<size_t>(1, comm_.options_.bucket_bytes / ts);
    Signature sig = signature(CollectiveKind::kAllreduceN, 0, type, op);
    describe_buffers(sig, counts, n, bucket_elems);
    if (n == 0) verify(sig);
    for_each_bucket(buffers, counts, n, ts, bucket_elems,
                    [&](void* buf, size_t count) { allreduce_checked(buf, count, type, op, sig); });
  });
}

void Subgroup::broadcast(void* buf, size_t count, DataType type, int root) {
  collective([&] {
    if (root < 0 || root >= size()) {
      throw ArgumentError("broadcast: root " + std::to_string(root) +
                          " is not a rank of the group (0.." + std::to_string(size() - 1) + ")");
    }
    check_not_null("broadcast", count, buf, buf);
    if (const void* b[] = {buf}; count > 0) host_only("broadcast", b);
    const Signature sig = signature(CollectiveKind::kBroadcast, count, type, ReduceOp::kSum, root);
    broadcast_call(group_, verifier(), sig, buf, count, type, root, comm_.options_.small_bytes);
  });
}

void Subgroup::allgather(const void* send, void* recv, size_t count, DataType type) {
  collective([&] {
    check_not_null("allgather", count, send, recv);
    if (const void* b[] = {send, recv}; count > 0) host_only("allgather", b);
    const Signature sig = signature(CollectiveKind::kAllgather, count, type, ReduceOp::kSum);
    allgather_call(group_, verifier(), sig, send, recv, count, type);
  });
}

void Subgroup::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                              ReduceOp op) {
  collective([&] {
    check_not_null("reduce_scatter", recv_count, send, recv);
    check_reduction("reduce_scatter", type, op);
    if (const void* b[] = {send, recv}; recv_count > 0) host_only("reduce_scatter", b);
    const Signature sig = signature(CollectiveKind::kReduceScatter, recv_count, type, op);
    reduce_scatter_call(group_, verifier(), sig, send, recv, recv_count, type, op);
  });
}

void Subgroup::barrier() {
  collective(
      [&] { verify(signature(CollectiveKind::kBarrier, 0, DataType::kUint8, ReduceOp::kSum)); });
}

void Subgroup::alltoall(const void* send, void* recv, size_t count, DataType type) {
  collective([&] {
    if (const void* b[] = {send, recv}; count > 0) host_only("alltoall", b);
    const Signature sig = signature(CollectiveKind::kAlltoall, count, type, ReduceOp::kSum);
    alltoall_call(group_, verifier(), sig, send, recv, count, type);
  });
}

void Subgroup::alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                         void* recv, const size_t* recv_counts, const size_t* recv_displs,
                         DataType type) {
  collective([&] {
    const void* b[] = {send, recv};
    host_only("alltoallv", b);
    const Signature sig = signature(CollectiveKind::kAlltoallv, 0, type, ReduceOp::kSum);
    alltoallv_call(group_, verifier(), sig, send, send_counts, send_displs, recv, recv_counts,
                   recv_displs, type);
  });
}

void Subgroup::verify(const Signature& sig) {
  if (size() > 1) check_signatures(group_, sig);
}

int Subgroup::peer_rank(const char* what, int peer) const {
  if (peer < 0 || peer >= size()) {
    throw ArgumentError(std::string(what) + ": peer " + std::to_string(peer) +
                        " is not a rank of the group (0.." + std::to_string(size() - 1) + ")");
  }
  return global(peer);
}

void Subgroup::send(const void* buf, size_t count, DataType type, int peer, int tag) {
  const int to = peer_rank("send", peer);
  comm_.check_peer("send", to, buf, count);
  comm_.mailbox_->send(to, id_, tag, buf, count, type);
}

void Subgroup::recv(void* buf, size_t count, DataType type, int peer, int tag) {
  const int from = peer_rank("recv", peer);
  comm_.check_peer("recv", from, buf, count);
  comm_.mailbox_->recv(from, id_, tag, buf, count, type);
}

int Subgroup::recv_any(void* buf, size_t count, DataType type, int tag) {
  comm_.check_any(buf, count, size());
  std::vector<int> peers;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) peers.push_back(global(r));
  }
  const int from = comm_.mailbox_->recv_any(peers, id_, tag, buf, count, type);
  for (int r = 0; r < size(); ++r) {
    if (global(r) == from) return r;
  }
  DDL_FAIL("recv_any: the sender " + std::to_string(from) + " is not a member");
}

}  // namespace ddl::comm
