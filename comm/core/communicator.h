#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/check.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/collectives/collectives.h"
#include "comm/collectives/dimension.h"
#include "comm/collectives/node.h"
#include "comm/collectives/signature.h"
#include "comm/core/calls.h"
#include "comm/core/mailbox.h"
#include "comm/core/settings.h"
#include "comm/core/subgroup.h"
#include "comm/device/device.h"
#include "comm/topology.h"
#include "comm/transport/link.h"

namespace ddl::comm {

/// A bad argument to a collective (null buffer, root out of range). what() says which.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// DDL_CHECK found a result that differs from the reference.
using CheckError = base::Error<struct CheckErrorTag>;

/// The ranks of one job, wired together: the C, C++ and Python APIs all sit on this.
///
/// Wiring: each rank makes a shared-memory device and a TCP device, publishes
/// "host|tcp-address|shm-address" through the bootstrap, and learns everyone's. Links are made
/// on first use (shared memory to ranks on the same host, TCP to the others), so a rank only
/// connects to the peers its algorithms talk to: ring neighbours in each dimension and
/// recursive-doubling partners. The rings come from the topology file; without one, every
/// rank is in one ring in rank order.
///
/// GPU buffers (when the NCCL path is built and a GPU is present) go to NCCL instead: one NCCL
/// communicator for the whole job and one per ring of the topology, made on the first
/// collective on GPU memory (each ring's first member makes the id, the host transports carry
/// it). A collective's buffers must be all on the GPU or all in host memory.
///
/// Collectives are serialised by a mutex; every rank must call them in the same order. Each
/// call is numbered (from 1, calls refused for a bad argument included) and its signature
/// (kind, count, type, reduction, root, number) is compared across the ranks in the call's
/// first messages (signature.h): when they differ the call throws MismatchError on every rank,
/// naming two ranks and their calls, and so does every later collective of this communicator.
///
/// Groups (create_group(), subgroup.h) run their collectives over the same links under the
/// same mutex, numbered on their own; messages (send(), recv(), mailbox.h) use links of their
/// own, made by a second pair of devices whose addresses are published with the others, and are
/// not serialised with the collectives.
class Communicator {
 public:
  /// Wires up the job. `topology` (from the topology file) must match the bootstrap's rank and
  /// size; without it hosts are told apart by host name. Throws BootstrapError,
  /// transport::TransportError, TopologyError.
  Communicator(std::unique_ptr<Bootstrap> bootstrap, std::optional<Topology> topology,
               CommOptions options, std::string token);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  /// The sizes of the dimensions the multi-dimensional allreduce runs on host memory,
  /// innermost first: the topology's rings through this rank, a long one as its sub-rings
  /// (DDL_MAX_RING). Empty without a topology.
  std::vector<int> allreduce_dimensions() const;
  int gpu() const { return gpu_; }

  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  void allreduce_n(void* const* buffers, const size_t* counts, size_t n, DataType type,
                   ReduceOp op);
  void broadcast(void* buf, size_t count, DataType type, int root);
  void allgather(const void* send, void* recv, size_t count, DataType type);
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  void barrier();
  /// ddl_alltoall and ddl_alltoallv (pairwise exchange over the links, on host memory).
  void alltoall(const void* send, void* recv, size_t count, DataType type);
  void alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs, void* recv,
                 const size_t* recv_counts, const size_t* recv_displs, DataType type);
  /// ddl_send and ddl_recv: messages to and from `peer` on links of their own (mailbox.h),
  /// not serialised with the collectives. Throw ArgumentError for a bad peer or buffer.
  void send(const void* buf, size_t count, DataType type, int peer, int tag);
  void recv(void* buf, size_t count, DataType type, int peer, int tag);
  /// ddl_recv_any: the first message under `tag` from whichever other rank sends one
  /// (Mailbox::recv_any); returns its sender. Throws ArgumentError for a bad buffer or a job of
  /// one rank.
  int recv_any(void* buf, size_t count, DataType type, int tag);
  /// ddl_group_create: the group of `ranks` (distinct job ranks), or nullptr when this rank is
  /// not one of them. Members must all make their groups with the same lists in the same
  /// order. Nothing is sent, and the collective lock is not taken (a collective running on
  /// another thread does not hold it up): the group's id comes from the list and how many
  /// groups of that list this rank made before, so members agree on it without asking anyone,
  /// and members whose lists differ have different ids, so the group's first collective fails
  /// with MismatchError (or times out when their member sets do not meet). Throws
  /// ArgumentError for a bad list.
  std::unique_ptr<Subgroup> create_group(std::span<const int> ranks);

 private:
  friend class Subgroup;
  /// The constructor's steps. find_self: this rank's placement (nullptr without a topology),
  /// after checking the topology is this job's.
  const RankPlacement* find_self(const std::optional<Topology>& topology);
  /// Makes the TCP and shared-memory devices when there are peers; returns what this rank
  /// publishes: "host\ntcp-address\nshm-address\npid" (just "host\n" when alone).
  std::string open_devices(const std::optional<Topology>& topology, const RankPlacement* me,
                           const std::string& token);
  /// Fills hosts_ and the addresses from every rank's published value; returns their pids.
  std::vector<int> learn_peers(const std::vector<std::string>& all);
  /// host_of_, local_rank_ and local_size_.
  void find_local_ranks(const std::optional<Topology>& topology, const RankPlacement* me);
  /// flat_, and dims_ from the topology's rings, with their sub_rings_.
  void make_groups(const std::optional<Topology>& topology);
  /// Links to the ring neighbours of flat_, dims_ and sub_rings_, and a byte each way with each.
  void connect_neighbours();
  transport::Link& link(int peer);
  /// Runs one collective call: serialised, numbered (by `seq`: the job's or a group's),
  /// refused once a mismatch was found, and remembering a MismatchError it throws.
  template <typename Body>
  void collective(uint64_t& seq, Body&& body);
  template <typename Body>
  void collective(Body&& body) {
    collective(seq_, std::forward<Body>(body));
  }
  /// The message link to `peer` (p2p devices), for mailbox_: Device::connect, or (not
  /// `wait`) Device::try_connect.
  std::unique_ptr<transport::Link> connect_message_link(int peer, bool wait);
  /// Throws ArgumentError unless `peer` is another rank and `buf` holds `count` elements.
  void check_peer(const char* what, int peer, const void* buf, size_t count) const;
  /// Throws ArgumentError unless `buf` holds `count` elements and the group has `ranks` > 1.
  void check_any(const void* buf, size_t count, int ranks) const;
  /// The signature of the call being made.
  Signature signature(CollectiveKind kind, size_t count, DataType type, ReduceOp op,
                      int root = -1) const;
  /// Compares `sig` across the ranks; throws MismatchError on every rank when it differs.
  void verify(const Signature& sig);
  /// verify(), as the shared steps of calls.h take it.
  Verify verifier() {
    return [this](const Signature& sig) { verify(sig); };
  }
  /// From `send` into `recv` (the same buffer, or not) on host memory; with `sig`, the call's
  /// signature is checked on the way (at no extra message for recursive doubling), else the
  /// caller has checked it.
  void allreduce_locked(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        Signature* sig);
  /// The algorithm for an allreduce of `bytes` on host memory (options_.algo resolved).
  const AllreduceAlgorithm& choose_allreduce(size_t bytes) const;
  /// What the algorithms run over: every rank, the dimensions, the node group when it holds
  /// the job (shm_job()).
  AllreduceSite allreduce_site();
  /// Whether node_ holds every rank (a job on one host): then every call's signature is
  /// checked through it, whatever route the data takes.
  bool node_is_job() const;
  /// Whether the other collectives go through node_ (a job on one host, not forced off it).
  bool shm_job() const;
  /// This host's ranks as a NodeGroup, and the dimensions of the multi-dimensional allreduce.
  void make_node_group(const std::vector<int>& pids, const std::string& job);
  void make_dimensions();
  /// DDL_CHECK: throws CheckError naming the first element of `got` off `want`.
  void compare_with_reference(const void* got, const void* want, size_t count, DataType type) const;
  std::string peer_name(int peer) const;
  /// Whether the buffers are GPU memory; throws ArgumentError when one is and another is not.
  bool on_device(const char* what, std::span<const void* const> buffers);
  /// Whether the call goes to the GPU (on_device()); then, once NCCL is known to reduce the
  /// signature's type with its op (when the call `reduces`), `sig` is routed there and verified.
  bool to_device(const char* what, std::span<const void* const> buffers, Signature& sig,
                 bool reduces);
  /// The NCCL communicators, made on first use.
  device::Comm& device_flat();
  /// Throws ArgumentError "<what>: <why>" when NCCL cannot reduce `type` with `op`.
  static void check_device_reduction(const char* what, DataType type, ReduceOp op);
  void device_allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int gpu_ = -1;
  CommOptions options_;
  std::unique_ptr<Bootstrap> bootstrap_;    ///< kept: PMIx finalises with it
  std::vector<std::string> hosts_;          ///< each rank's host name
  std::vector<std::string> host_of_;        ///< what tells hosts apart, by rank
  std::vector<std::string> tcp_addresses_;  ///< each rank's TCP device address
  std::vector<std::string> shm_addresses_;
  std::unique_ptr<transport::Device> tcp_;
  std::unique_ptr<transport::Device> shm_;
  /// The message links' devices (send, recv): their own listener and segment names.
  std::unique_ptr<transport::Device> message_tcp_;
  std::unique_ptr<transport::Device> message_shm_;
  std::vector<std::string> message_tcp_addresses_;
  std::unique_ptr<Mailbox> mailbox_;
  std::mutex groups_mutex_;
  /// Groups made, by member-list hash (for their ids), under groups_mutex_.
  std::map<uint64_t, uint32_t> groups_made_;
  std::mutex links_mutex_;
  std::map<int, std::unique_ptr<transport::Link>> links_;
  std::unique_ptr<Group> flat_;               ///< every rank, in rank order
  std::vector<std::unique_ptr<Group>> dims_;  ///< this rank's ring in each dimension (size > 1)
  /// sub_rings_[i]: dims_[i]'s sub-rings (ring_factors), innermost first; empty when it runs
  /// whole. Only the host-memory multi-dimensional allreduce uses them.
  std::vector<std::vector<std::unique_ptr<Group>>> sub_rings_;
  std::unique_ptr<NodeGroup> node_;  ///< this host's ranks, when there are several
  std::vector<std::unique_ptr<Dimension>> dimensions_;  ///< dims_ as Dimensions (node_ inside)
  std::vector<Dimension*> dimension_list_;              ///< dimensions_, for AllreduceSite
  std::mutex collective_mutex_;
  uint64_t seq_ = 0;      ///< collective calls made, under collective_mutex_
  std::string poisoned_;  ///< the mismatch that made this communicator unusable; "" when none
  std::shared_ptr<device::Runtime> device_;                 ///< null: host buffers only
  std::unique_ptr<device::Comm> device_flat_;               ///< every rank
  std::vector<std::unique_ptr<device::Comm>> device_dims_;  ///< one per dims_ entry
};

template <typename Body>
void Communicator::collective(uint64_t& seq, Body&& body) {
  std::lock_guard lock(collective_mutex_);
  ++seq;
  if (!poisoned_.empty()) throw MismatchError(poisoned_);
  try {
    body();
  } catch (const MismatchError& e) {
    poisoned_ = e.what();
    throw;
  }
}

/// Where this process's rank and the job's size come from.
struct Identity {
  int rank = -1;
  int size = 0;
  std::string source;  ///< "DDL_RANK", "OMPI_COMM_WORLD_RANK", ...; "" when none was found
};

/// The first of the rank variables libddl reads (comm/bootstrap/rank_variables.h: DDL_RANK,
/// OMPI_COMM_WORLD_RANK, JSM_NAMESPACE_RANK, SLURM_PROCID, PMI_RANK) that is set, with its size.
/// Throws BootstrapError when a rank is set without a size or either is not a number.
Identity identity_from_environment();

/// What ddl_init() does: identity, topology file ($DDL_TOPOLOGY_FILE), bootstrap (PMIx when a
/// PMIx server is around, else ddlrun's rendezvous from $DDL_RENDEZVOUS and $DDL_JOB_TOKEN, else
/// a job of one when DDL_ALLOW_SINGLE=1 or the size is 1), then the Communicator.
std::unique_ptr<Communicator> init_from_environment();

}  // namespace ddl::comm
