// The communicator: identity, wiring, and the choice of algorithm for each collective.
//
// How it works: init_from_environment() finds the rank and size from whichever launcher
// started the process, reads the topology file when ddlrun wrote one, and picks the bootstrap
// (PMIx when a PMIx server is around, else ddlrun's rendezvous, else a job of one). The
// Communicator then publishes its transport addresses through the bootstrap and connects to
// its ring neighbours (every dimension's, and the flat ring's) in one global order of pairs, so
// no two ranks wait on each other in a cycle; other peers are connected on first use. Shared
// memory serves peers on the same host, TCP the others.
//
// Allreduce asks the registry of algorithms (comm/collectives/algorithms.h), unless DDL_ALGO or
// the mode letter names one: shared memory directly in a job on one host, recursive doubling
// below DDL_SMALL_BYTES (latency), the multi-dimensional ring when the topology has two or more
// dimensions with more than one rank (the PowerAI DDL algorithm), else the flat ring. A ring
// longer than DDL_MAX_RING (16) whose every hop leaves its host runs as sub-rings, each a
// dimension of its own (ring_factors, sub_ring_positions): a ring of d pays 2(d-1) latencies a
// pass, 4,608 hosts as 9 x 8 x 8 x 8 pay 58 and move the same bytes through each NIC (a ring
// with hops inside hosts would move more, so it runs whole); one long dimension alone is then
// multi-dimensional too. The
// algorithms divide for kAvg themselves (once, on the piece each rank owns). DDL_CHECK=tol also
// gathers every rank's input, reduces it in rank order, and compares each element of the result
// with that reference (host buffers only).
//
// Every collective call is numbered and its signature (kind, count, type, reduction, root,
// number, route) compared across all ranks before its data is used (signature.h): a small
// allreduce or broadcast carries it in its own messages (recursive doubling), every other
// call runs check_signatures() on the flat group first (which is all a barrier does). A
// MismatchError then makes the communicator refuse every later call with the same message: its
// links may hold bytes of calls that did not match.
//
// GPU buffers go to the device runtime (NCCL): the flat ring's NCCL allreduce, or, when the
// multi-dimensional ring would be chosen for host memory, device::multi_dim_allreduce over one
// NCCL communicator per dimension. Broadcast, allgather and reduce-scatter use the job's NCCL
// communicator; barrier always runs on the host transports.

#include "comm/core/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <span>

#include "comm/bootstrap/rank_variables.h"
#include "comm/core/calls.h"
#include "comm/mode.h"

namespace ddl::comm {

namespace {

/// A job of one rank: the allgather is the value itself.
class SingleBootstrap : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> allgather(const std::string& value, std::chrono::milliseconds) override {
    return {value};
  }
};

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int parse_int(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < 0 || v > (1L << 30)) {
    throw BootstrapError(std::string("$") + name + " is '" + value + "', not a rank number");
  }
  return static_cast<int>(v);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

/// The sub-rings `ring` runs as (ring_factors: none when it runs whole), each a Group of its
/// members in their order with this rank's place in it.
std::vector<std::unique_ptr<Group>> sub_rings(const Group& ring, int max_ring,
                                              const std::function<transport::Link&(int)>& link) {
  const std::vector<int> factors = ring_factors(ring.size(), max_ring);
  std::vector<std::unique_ptr<Group>> out;
  if (factors.size() < 2) return out;
  for (const std::vector<int>& positions : sub_ring_positions(ring.size(), ring.rank(), factors)) {
    std::vector<int> members;
    int self = 0;
    for (int p : positions) {
      if (p == ring.rank()) self = static_cast<int>(members.size());
      members.push_back(ring.global(p));
    }
    out.push_back(std::make_unique<Group>(std::move(members), self, link, ring.timeout()));
  }
  return out;
}

}  // namespace

Identity identity_from_environment() {
  for (const RankVariable* v : rank_variables_of(&RankVariable::identity)) {
    const std::string rank_var(v->rank), size_var(v->size);
    const char* r = env(rank_var.c_str());
    if (r == nullptr) continue;
    const char* s = env(size_var.c_str());
    if (s == nullptr) {
      throw BootstrapError("$" + rank_var + " is set but $" + size_var +
                           " is not; start the program with ddlrun");
    }
    Identity id{parse_int(rank_var.c_str(), r), parse_int(size_var.c_str(), s), rank_var};
    if (id.size < 1 || id.rank >= id.size) {
      throw BootstrapError("$" + rank_var + "=" + r + " is not below $" + size_var + "=" + s);
    }
    return id;
  }
  return {};
}

// The constructor's steps, in order: find this rank in the topology, open the devices, learn
// every rank's host and addresses through the bootstrap, tell hosts apart, make the groups (the
// flat ring and this rank's ring in each dimension), connect to the ring neighbours, then the
// node group, the dimensions and the GPU runtime.
Communicator::Communicator(std::unique_ptr<Bootstrap> bootstrap, std::optional<Topology> topology,
                           CommOptions options, std::string token)
    : rank_(bootstrap->rank()), size_(bootstrap->size()), options_(options) {
  const RankPlacement* me = find_self(topology);
  const std::string value = open_devices(topology, me, token);
  const std::vector<int> pids = learn_peers(bootstrap->allgather(value, options_.timeout));
  bootstrap_ = std::move(bootstrap);
  find_local_ranks(topology, me);
  make_groups(topology);
  if (size_ > 1) {
    connect_neighbours();
    make_node_group(pids, topology ? topology->job_id : std::string("ddl"));
    mailbox_ =
        std::make_unique<Mailbox>([this](int peer) { return connect_message_link(peer, true); },
                                  [this](int peer) { return connect_message_link(peer, false); },
                                  [this](int peer) { return peer_name(peer); }, options_.timeout);
  }
  make_dimensions();
  // The GPU runtime (NCCL), when there is one: loaded now rather than on the first collective.
  device_ = options_.device ? options_.device : device::load_nccl(nullptr);
}

const RankPlacement* Communicator::find_self(const std::optional<Topology>& topology) {
  if (!topology) return nullptr;
  const std::string who = "rank " + std::to_string(rank_);
  if (static_cast<int>(topology->ranks.size()) != size_) {
    throw TopologyError(who + ": the topology file describes " +
                        std::to_string(topology->ranks.size()) +
                        " ranks, but the launcher started " + std::to_string(size_) +
                        " (was it written for another job?)");
  }
  const RankPlacement* me = topology->find_rank(rank_);
  if (me == nullptr) throw TopologyError(who + ": not in the topology file");
  gpu_ = me->gpu;
  return me;
}

std::string Communicator::open_devices(const std::optional<Topology>& topology,
                                       const RankPlacement* me, const std::string& token) {
  std::string value = this_host() + "\n";
  if (size_ < 2) return value;
  transport::DeviceOptions d;
  d.rank = rank_;
  d.job_id = topology ? topology->job_id : (env("DDL_JOB_ID") ? env("DDL_JOB_ID") : "ddl");
  d.token = token;
  d.bind_address = me != nullptr ? me->address : "";
  try {
    tcp_ = transport::make_tcp_device(d);
  } catch (const transport::TransportError&) {
    d.bind_address.clear();  // the mapper's address is not on this host (an offline plan)
    tcp_ = transport::make_tcp_device(d);
  }
  shm_ = transport::make_shm_device(d);
  // The message links (send, recv): a listener and segment names of their own.
  message_tcp_ = transport::make_tcp_device(d);
  d.job_id += "-m";
  message_shm_ = transport::make_shm_device(d);
  return value + tcp_->address() + "\n" + shm_->address() + "\n" + std::to_string(getpid()) + "\n" +
         message_tcp_->address();
}

std::vector<int> Communicator::learn_peers(const std::vector<std::string>& all) {
  std::vector<int> pids;
  for (const std::string& v : all) {
    std::vector<std::string> f = split(v, '\n');
    f.resize(5);
    hosts_.push_back(f[0]);
    tcp_addresses_.push_back(f[1]);
    shm_addresses_.push_back(f[2]);
    pids.push_back(std::atoi(f[3].c_str()));
    message_tcp_addresses_.push_back(f[4]);
  }
  return pids;
}

void Communicator::find_local_ranks(const std::optional<Topology>& topology,
                                    const RankPlacement* me) {
  // Same host: by the topology's host index, else by host name.
  host_of_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    const RankPlacement* p = topology ? topology->find_rank(r) : nullptr;
    host_of_[r] = p != nullptr ? "#" + std::to_string(p->host) : hosts_[r];
  }
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (host_of_[r] != host_of_[rank_]) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }
  if (me != nullptr) local_rank_ = me->local_rank;
}

void Communicator::make_groups(const std::optional<Topology>& topology) {
  auto link_fn = [this](int peer) -> transport::Link& { return link(peer); };
  std::vector<int> all_ranks(size_);
  for (int r = 0; r < size_; ++r)
    all_ranks[r] = r;
  flat_ = std::make_unique<Group>(all_ranks, rank_, link_fn, options_.timeout);
  if (!topology) return;
  for (const std::vector<Ring>& rings : topology->rings) {
    for (const Ring& ring : rings) {
      auto it = std::find(ring.begin(), ring.end(), rank_);
      if (it == ring.end() || ring.size() < 2) continue;
      dims_.push_back(std::make_unique<Group>(ring, static_cast<int>(it - ring.begin()), link_fn,
                                              options_.timeout));
      // Sub-rings move the same bytes through each host's links only when every hop of the
      // ring leaves its host.
      bool across = true;
      for (size_t i = 0; i < ring.size(); ++i)
        across = across && host_of_[ring[i]] != host_of_[ring[(i + 1) % ring.size()]];
      sub_rings_.push_back(across ? sub_rings(*dims_.back(), options_.max_ring, link_fn)
                                  : std::vector<std::unique_ptr<Group>>{});
    }
  }
}

void Communicator::connect_neighbours() {
  // Ring neighbours now, in one global order of pairs.
  std::set<int> peers;
  auto neighbours = [&](const Group& g) {
    if (g.size() < 2) return;
    peers.insert(g.global((g.rank() + 1) % g.size()));
    peers.insert(g.global((g.rank() + g.size() - 1) % g.size()));
  };
  neighbours(*flat_);
  for (const auto& g : dims_)
    neighbours(*g);
  for (const auto& subs : sub_rings_) {
    for (const auto& g : subs)
      neighbours(*g);
  }
  for (int p : peers)
    link(p);
  // One byte each way with every neighbour: a link is whole only once both sides have
  // attached (a shared-memory segment's name is gone when its creator closes), so no rank
  // may leave init, and perhaps finalise at once, before its neighbours have attached.
  // Sends never block (the byte fits in any link's buffer), so the order does not matter.
  const std::byte hello{1};
  for (int p : peers)
    transport::exchange(&link(p), {&hello, 1}, nullptr, {}, options_.timeout);
  for (int p : peers) {
    std::byte got{};
    transport::exchange(nullptr, {}, &link(p), {&got, 1}, options_.timeout);
  }
}

Communicator::~Communicator() = default;

void Communicator::make_node_group(const std::vector<int>& pids, const std::string& job) {
  if (!options_.shm || local_size_ < 2) return;
  std::vector<NodeMember> members;
  int self = 0;
  for (int r = 0; r < size_; ++r) {
    if (host_of_[r] != host_of_[rank_]) continue;
    if (r == rank_) self = static_cast<int>(members.size());
    members.push_back({r, pids[r], peer_name(r)});
  }
  NodeOptions o;
  o.job = job;
  o.chunk_bytes = options_.shm_chunk_bytes;
  o.small_bytes = options_.shm_small_bytes;
  o.cma_bytes = options_.shm_cma_bytes;
  o.stream_bytes = options_.shm_stream_bytes;
  o.timeout = options_.timeout;
  node_ = std::make_unique<NodeGroup>(std::move(members), self, o);
}

void Communicator::make_dimensions() {
  // The ring of a dimension whose members are exactly this host's ranks runs through node_;
  // a long one runs as its sub-rings.
  for (size_t d = 0; d < dims_.size(); ++d) {
    const auto& g = dims_[d];
    bool this_host = node_ != nullptr && g->size() == node_->size();
    for (int i = 0; this_host && i < g->size(); ++i)
      this_host = host_of_[g->global(i)] == host_of_[rank_];
    // The node group's member order is rank order: the ring must be too for the same chunks.
    for (int i = 1; this_host && i < g->size(); ++i)
      this_host = g->global(i) > g->global(i - 1);
    if (this_host) {
      dimensions_.push_back(std::make_unique<NodeDimension>(*node_));
    } else if (!sub_rings_[d].empty()) {
      for (const auto& sub : sub_rings_[d])
        dimensions_.push_back(std::make_unique<RingDimension>(*sub));
    } else {
      dimensions_.push_back(std::make_unique<RingDimension>(*g));
    }
  }
  for (const auto& d : dimensions_)
    dimension_list_.push_back(d.get());
}

std::vector<int> Communicator::allreduce_dimensions() const {
  std::vector<int> sizes;
  for (const auto& d : dimensions_)
    sizes.push_back(d->size());
  return sizes;
}

bool Communicator::node_is_job() const {
  return node_ != nullptr && node_->size() == size_;
}

bool Communicator::shm_job() const {
  return node_is_job() && (options_.algo == nullptr || options_.algo->shm_collectives);
}

std::string Communicator::peer_name(int peer) const {
  std::string s = "rank " + std::to_string(peer);
  if (peer >= 0 && peer < static_cast<int>(hosts_.size())) s += " (" + hosts_[peer] + ")";
  return s;
}

transport::Link& Communicator::link(int peer) {
  std::lock_guard lock(links_mutex_);
  auto it = links_.find(peer);
  if (it != links_.end()) return *it->second;
  const bool local = host_of_[peer] == host_of_[rank_];
  transport::Device& dev = local ? *shm_ : *tcp_;
  auto l = dev.connect(peer, peer_name(peer), local ? shm_addresses_[peer] : tcp_addresses_[peer],
                       options_.timeout);
  transport::Link& ref = *l;
  links_[peer] = std::move(l);
  return ref;
}

bool Communicator::on_device(const char* what, std::span<const void* const> buffers) {
  if (!device_) return false;
  int on = 0, off = 0;
  for (const void* b : buffers) {
    if (b == nullptr) continue;
    (device_->is_device_pointer(b) ? on : off)++;
  }
  if (on > 0 && off > 0) {
    throw ArgumentError(std::string(what) +
                        ": one buffer is GPU memory and another is host memory; pass both on "
                        "the GPU or both in host memory");
  }
  return on > 0;
}

bool Communicator::to_device(const char* what, std::span<const void* const> buffers, Signature& sig,
                             bool reduces) {
  if (!on_device(what, buffers)) return false;
  if (reduces)
    check_device_reduction(what, static_cast<DataType>(sig.type), static_cast<ReduceOp>(sig.op));
  sig.route = kRouteDevice;
  verify(sig);
  return true;
}

device::Comm& Communicator::device_flat() {
  if (device_flat_) return *device_flat_;
  // The topology's GPU (a host index) as this process's CUDA sees it, else the local rank.
  const int gpu =
      gpu_ >= 0 ? device::visible_device(gpu_, env("CUDA_VISIBLE_DEVICES")) : local_rank_;
  // Member 0 of each ring makes the ring's NCCL id; the host transports carry it round.
  auto join = [&](const Group& g) {
    std::string id(device_->id_bytes(), '\0');
    if (g.rank() == 0) id = device_->new_id();
    if (g.size() > 1) ring_broadcast(g, id.data(), id.size(), 0);
    return device_->join(id, g.size(), g.rank(), gpu, options_.timeout);
  };
  std::unique_ptr<device::Comm> flat = join(*flat_);
  std::vector<std::unique_ptr<device::Comm>> dims;
  for (const auto& g : dims_)
    dims.push_back(join(*g));
  device_dims_ = std::move(dims);
  device_flat_ = std::move(flat);
  return *device_flat_;
}

void Communicator::check_device_reduction(const char* what, DataType type, ReduceOp op) {
  if (std::string why = device::nccl_reduction_error(type, op); !why.empty()) {
    throw ArgumentError(std::string(what) + ": " + why);
  }
}

void Communicator::device_allreduce(const void* send, void* recv, size_t count, DataType type,
                                    ReduceOp op) {
  device::Comm& flat = device_flat();
  if (count == 0) return;
  AllreduceShape shape;
  shape.bytes = count * type_size(type);
  shape.small_bytes = options_.small_bytes;
  shape.rings = shape.dimensions = device_dims_.size();
  const AllreduceAlgorithm& algo = ::ddl::comm::choose_allreduce(options_.algo, shape);
  if (algo.device == nullptr) {
    flat.allreduce(send, recv, count, type, op);
    return;
  }
  std::vector<device::Comm*> rings;
  for (const auto& c : device_dims_)
    rings.push_back(c.get());
  algo.device(rings, flat, send, recv, count, type, op);
}

Signature Communicator::signature(CollectiveKind kind, size_t count, DataType type, ReduceOp op,
                                  int root) const {
  return make_signature(seq_, kind, count, type, op, root);
}

void Communicator::verify(const Signature& sig) {
  if (size_ == 1) return;
  if (node_is_job()) {
    // A job on one host checks every call through the node group, whatever its route, so
    // ranks whose routes differ still meet in the same check.
    node_->barrier(&sig);
  } else {
    check_signatures(*flat_, sig);
  }
}

const AllreduceAlgorithm& Communicator::choose_allreduce(size_t bytes) const {
  AllreduceShape shape;
  shape.bytes = bytes;
  shape.small_bytes = options_.small_bytes;
  shape.one_host = shm_job();
  shape.rings = dims_.size();
  shape.dimensions = dimensions_.size();
  return ::ddl::comm::choose_allreduce(options_.algo, shape);
}

AllreduceSite Communicator::allreduce_site() {
  return {*flat_,     dimension_list_, shm_job() ? node_.get() : nullptr, options_.pipeline_bytes,
          verifier(), node_is_job()};
}

void Communicator::allreduce_locked(const void* send, void* recv, size_t count, DataType type,
                                    ReduceOp op, Signature* sig) {
  const size_t bytes = count * type_size(type);
  const auto* in = static_cast<const std::byte*>(send);
  const auto* out = static_cast<const std::byte*>(recv);
  const bool apart = send != recv && count > 0 && (in + bytes <= out || out + bytes <= in);
  if (size_ > 1) {
    const AllreduceAlgorithm& algo = choose_allreduce(bytes);
    if (apart && algo.run_apart != nullptr) {
      // The algorithm reads send and writes recv itself: no copy of the input first (which
      // would be a whole extra pass over memory).
      algo.run_apart(allreduce_site(), send, recv, count, type, op, sig);
      return;
    }
    if (send != recv && count > 0) std::memmove(recv, send, bytes);
    algo.run(allreduce_site(), recv, count, type, op, sig);
  } else if (send != recv && count > 0) {
    std::memmove(recv, send, bytes);
  }
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType type,
                             ReduceOp op) {
  collective([&] {
    if (count > 0 && (send == nullptr || recv == nullptr)) {
      throw ArgumentError("allreduce: a null buffer for " + std::to_string(count) + " elements");
    }
    check_reduction("allreduce", type, op);
    Signature sig = signature(CollectiveKind::kAllreduce, count, type, op);
    if (const void* b[] = {send, recv}; count > 0 && to_device("allreduce", b, sig, true)) {
      return device_allreduce(send, recv, count, type, op);
    }
    const size_t bytes = count * type_size(type);
    std::vector<std::byte> reference;
    Signature* to_check = &sig;  // null once checked
    if (options_.check && size_ > 1 && count > 0) {
      // Every rank's input, reduced in rank order (once the ranks agree on the call).
      verify(sig);
      to_check = nullptr;
      std::vector<std::byte> inputs(bytes * size_);
      std::memcpy(inputs.data() + bytes * rank_, send, bytes);
      ring_allgather(*flat_, inputs.data(), count * size_, type);
      reference.assign(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(bytes));
      for (int r = 1; r < size_; ++r)
        reduce_into(reference.data(), inputs.data() + bytes * r, count, type, op);
      if (op == ReduceOp::kAvg) divide(reference.data(), count, type, size_);
    }
    allreduce_locked(send, recv, count, type, op, to_check);
    if (!reference.empty()) compare_with_reference(recv, reference.data(), count, type);
  });
}

void Communicator::compare_with_reference(const void* got_buf, const void* want_buf, size_t count,
                                          DataType type) const {
  const double tol = *options_.check;
  for (size_t i = 0; i < count; ++i) {
    const double got = element_value(got_buf, i, type), want = element_value(want_buf, i, type);
    if (std::isnan(got) && std::isnan(want)) continue;
    if (!(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)))) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "rank %d: DDL_CHECK: allreduce element %zu of %zu is %.9g, the reference "
                    "is %.9g (tolerance %g)",
                    rank_, i, count, got, want, tol);
      throw CheckError(buf);
    }
  }
}

void Communicator::allreduce_n(void* const* buffers, const size_t* counts, size_t n, DataType type,
                               ReduceOp op) {
  collective([&] {
    check_buffers(buffers, counts, n);
    check_reduction("allreduce_n", type, op);
    const size_t ts = type_size(type);
    const size_t bucket_elems = std::max<size_t>(1, options_.bucket_bytes / ts);
    Signature sig = signature(CollectiveKind::kAllreduceN, 0, type, op);
    describe_buffers(sig, counts, n, bucket_elems);
    if (n > 0 && device_ &&
        to_device("allreduce_n", std::vector<const void*>(buffers, buffers + n), sig, true)) {
      // NCCL fuses small operations itself; each buffer is one allreduce, in place.
      for (size_t k = 0; k < n; ++k)
        if (counts[k] > 0) device_allreduce(buffers[k], buffers[k], counts[k], type, op);
      return;
    }
    if (n == 0) verify(sig);
    // Every bucket carries the call's signature (the same on every rank when the first
    // bucket's was).
    for_each_bucket(buffers, counts, n, ts, bucket_elems, [&](void* buf, size_t count) {
      Signature bucket_sig = sig;
      allreduce_locked(buf, buf, count, type, op, &bucket_sig);
    });
  });
}

void Communicator::broadcast(void* buf, size_t count, DataType type, int root) {
  collective([&] {
    if (root < 0 || root >= size_) {
      throw ArgumentError("broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                          std::to_string(size_ - 1) + ")");
    }
    check_not_null("broadcast", count, buf, buf);
    Signature sig = signature(CollectiveKind::kBroadcast, count, type, ReduceOp::kSum, root);
    if (const void* b[] = {buf}; count > 0 && to_device("broadcast", b, sig, false)) {
      return device_flat().broadcast(buf, count, type, root);
    }
    if (shm_job()) {
      sig.route = route_of("shm");
      node_->broadcast(buf, count * type_size(type), root, &sig);
      return;
    }
    broadcast_call(*flat_, verifier(), sig, buf, count, type, root,
                   node_is_job() ? 0 : options_.small_bytes);
  });
}

void Communicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  collective([&] {
    check_not_null("allgather", count, send, recv);
    Signature sig = signature(CollectiveKind::kAllgather, count, type, ReduceOp::kSum);
    if (const void* b[] = {send, recv}; count > 0 && to_device("allgather", b, sig, false)) {
      return device_flat().allgather(send, recv, count, type);
    }
    if (shm_job()) {
      sig.route = route_of("shm");
      node_->allgather(send, recv, count, type, &sig);
      return;
    }
    allgather_call(*flat_, verifier(), sig, send, recv, count, type);
  });
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                                  ReduceOp op) {
  collective([&] {
    check_not_null("reduce_scatter", recv_count, send, recv);
    check_reduction("reduce_scatter", type, op);
    Signature sig = signature(CollectiveKind::kReduceScatter, recv_count, type, op);
    if (const void* b[] = {send, recv};
        recv_count > 0 && to_device("reduce_scatter", b, sig, true)) {
      return device_flat().reduce_scatter(send, recv, recv_count, type, op);
    }
    if (shm_job()) {
      sig.route = route_of("shm");
      node_->reduce_scatter(send, recv, recv_count, type, op, &sig);
      return;
    }
    reduce_scatter_call(*flat_, verifier(), sig, send, recv, recv_count, type, op);
  });
}

void Communicator::barrier() {
  // Checking the signatures is a barrier: no rank leaves before every rank's has arrived.
  collective([&] {
    Signature sig = signature(CollectiveKind::kBarrier, 0, DataType::kUint8, ReduceOp::kSum);
    if (shm_job()) {
      sig.route = route_of("shm");
      node_->barrier(&sig);
      return;
    }
    verify(sig);
  });
}

void Communicator::alltoall(const void* send, void* recv, size_t count, DataType type) {
  collective([&] {
    if (const void* b[] = {send, recv}; count > 0 && on_device("alltoall", b)) {
      throw ArgumentError("alltoall: GPU memory is not supported yet; pass host memory");
    }
    const Signature sig = signature(CollectiveKind::kAlltoall, count, type, ReduceOp::kSum);
    alltoall_call(*flat_, verifier(), sig, send, recv, count, type);
  });
}

void Communicator::alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                             void* recv, const size_t* recv_counts, const size_t* recv_displs,
                             DataType type) {
  collective([&] {
    if (const void* b[] = {send, recv}; on_device("alltoallv", b)) {
      throw ArgumentError("alltoallv: GPU memory is not supported yet; pass host memory");
    }
    const Signature sig = signature(CollectiveKind::kAlltoallv, 0, type, ReduceOp::kSum);
    alltoallv_call(*flat_, verifier(), sig, send, send_counts, send_displs, recv, recv_counts,
                   recv_displs, type);
  });
}

void Communicator::check_peer(const char* what, int peer, const void* buf, size_t count) const {
  if (peer < 0 || peer >= size_) {
    throw ArgumentError(std::string(what) + ": peer " + std::to_string(peer) +
                        " is not a rank (0.." + std::to_string(size_ - 1) + ")");
  }
  if (peer == rank_) {
    throw ArgumentError(std::string(what) + ": peer " + std::to_string(peer) +
                        " is this rank; messages go to other ranks");
  }
  if (count > 0 && buf == nullptr) throw ArgumentError(std::string(what) + ": a null buffer");
}

void Communicator::send(const void* buf, size_t count, DataType type, int peer, int tag) {
  check_peer("send", peer, buf, count);
  mailbox_->send(peer, 0, tag, buf, count, type);
}

void Communicator::recv(void* buf, size_t count, DataType type, int peer, int tag) {
  check_peer("recv", peer, buf, count);
  mailbox_->recv(peer, 0, tag, buf, count, type);
}

int Communicator::recv_any(void* buf, size_t count, DataType type, int tag) {
  check_any(buf, count, size_);
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) peers.push_back(r);
  }
  return mailbox_->recv_any(peers, 0, tag, buf, count, type);
}

void Communicator::check_any(const void* buf, size_t count, int ranks) const {
  if (ranks < 2) {
    throw ArgumentError(
        "recv_any: this rank is alone in its group; there is no other rank to receive from");
  }
  if (count > 0 && buf == nullptr) throw ArgumentError("recv_any: a null buffer");
}

std::unique_ptr<transport::Link> Communicator::connect_message_link(int peer, bool wait) {
  const bool local = host_of_[peer] == host_of_[rank_];
  transport::Device& dev = local ? *message_shm_ : *message_tcp_;
  const std::string& address = local ? shm_addresses_[peer] : message_tcp_addresses_[peer];
  return wait ? dev.connect(peer, peer_name(peer), address, options_.timeout)
              : dev.try_connect(peer, peer_name(peer), address, options_.timeout);
}

std::unique_ptr<Subgroup> Communicator::create_group(std::span<const int> ranks) {
  if (ranks.empty()) throw ArgumentError("group_create: no ranks");
  std::set<int> seen;
  int self = -1;
  uint64_t hash = 0xcbf29ce484222325u;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size_) {
      throw ArgumentError("group_create: " + std::to_string(r) + " is not a rank (0.." +
                          std::to_string(size_ - 1) + ")");
    }
    if (!seen.insert(r).second) {
      throw ArgumentError("group_create: rank " + std::to_string(r) + " is listed twice");
    }
    if (r == rank_) self = static_cast<int>(i);
    hash = (hash ^ static_cast<uint32_t>(r)) * 0x100000001b3u;
  }
  if (self < 0) return nullptr;
  uint32_t id = 0;
  {
    std::lock_guard lock(groups_mutex_);
    // The n-th group of this list: members make the same groups in the same order.
    const uint32_t nth = ++groups_made_[hash];
    id = static_cast<uint32_t>((hash ^ (hash >> 32)) * 0x9e3779b1u + nth * 0x85ebca6bu);
    if (id == 0) id = nth;
  }
  return std::make_unique<Subgroup>(*this, std::vector<int>(ranks.begin(), ranks.end()), self, id);
}

namespace {

/// The size variable that goes with rank variable `rank` (Identity::source).
std::string size_variable_of(const std::string& rank) {
  for (const RankVariable& v : rank_variables())
    if (v.rank == rank) return std::string(v.size);
  return rank;
}

/// "DDL_RANK, OMPI_COMM_WORLD_RANK, ...": the variables identity_from_environment() reads.
std::string identity_variables() {
  std::string out;
  for (const RankVariable* v : rank_variables_of(&RankVariable::identity))
    out += (out.empty() ? "" : ", ") + std::string(v->rank);
  return out;
}

}  // namespace

std::unique_ptr<Communicator> init_from_environment() {
  const Identity id = identity_from_environment();
  const CommOptions options = options_from_environment();
  std::unique_ptr<Bootstrap> bootstrap = make_pmix_bootstrap();
  if (bootstrap != nullptr && !id.source.empty() &&
      (bootstrap->rank() != id.rank || bootstrap->size() != id.size)) {
    // Name the variable that disagrees: -x DDL_SIZE=3 was reported as $DDL_RANK's.
    const bool rank_differs = bootstrap->rank() != id.rank;
    throw BootstrapError(
        "PMIx says rank " + std::to_string(bootstrap->rank()) + " of " +
        std::to_string(bootstrap->size()) + ", but $" +
        (rank_differs ? id.source : size_variable_of(id.source)) + " says " +
        (rank_differs ? "rank " + std::to_string(id.rank) : std::to_string(id.size) + " ranks"));
  }
  const char* token = env("DDL_JOB_TOKEN");
  if (bootstrap == nullptr) {
    const char* single = env("DDL_ALLOW_SINGLE");
    if (id.source.empty()) {
      if (single == nullptr || std::string(single) != "1") {
        throw BootstrapError(
            "this process was not started by a launcher (no PMIx server, and none of " +
            identity_variables() +
            " is set); run it with ddlrun, or set DDL_ALLOW_SINGLE=1 to run it as a job of one "
            "rank");
      }
      bootstrap = std::make_unique<SingleBootstrap>();
    } else if (id.size == 1) {
      bootstrap = std::make_unique<SingleBootstrap>();
    } else {
      const char* rv = env("DDL_RENDEZVOUS");
      if (rv == nullptr || token == nullptr) {
        throw BootstrapError("rank " + std::to_string(id.rank) + " of " + std::to_string(id.size) +
                             " (from $" + id.source +
                             "): no PMIx server and no $DDL_RENDEZVOUS/$DDL_JOB_TOKEN to meet "
                             "the other ranks; start the program with ddlrun");
      }
      bootstrap = make_rendezvous_bootstrap(rv, token, id.rank, id.size, options.timeout);
    }
  }
  std::optional<Topology> topology;
  if (const char* path = env("DDL_TOPOLOGY_FILE")) topology = read_topology_file(path);
  return std::make_unique<Communicator>(std::move(bootstrap), std::move(topology), options,
                                        token != nullptr ? token : "");
}

}  // namespace ddl::comm
