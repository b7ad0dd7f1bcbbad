// The C API (ddl.h) over one process-wide Communicator.
//
// How it works: every entry point catches every exception and turns it into a status code,
// keeping the message for ddl_last_error() in a thread-local string. The communicator is
// created by ddl_init() and destroyed by ddl_finalize(), under a mutex; the collectives take a
// shared reference to it so that finalize cannot pull it from under a running one. Group
// handles are entries of a registry under the same mutex (the world group is made by
// ddl_init()), by serial numbers that are never reused: a call looks its handle up and takes
// shared references to the group and the communicator, so a stale or foreign handle is refused
// with a message instead of followed, and
// ddl_finalize() (which empties the registry) or ddl_group_destroy() cannot free a group under a
// running call.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/table.h"
#include "comm/collectives/shared_buffer.h"
#include "comm/core/communicator.h"
#include "ddl/ddl.h"

namespace {

using ddl::comm::Communicator;

std::mutex g_mutex;
std::shared_ptr<Communicator> g_comm;
thread_local std::string g_last_error;

/// What a group handle names: the job (sub null) or a subgroup, with its communicator.
struct GroupEntry {
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<ddl::comm::Subgroup> sub;
};

/// The live groups (the world's included) by handle, under g_mutex. A handle is a serial
/// number, never reused, so a stale one can never name a newer group.
std::map<ddl_group_t, GroupEntry> g_groups;
ddl_group_t g_world = nullptr;
uintptr_t g_serial = 0;

/// Files `g` under a new handle (g_mutex held).
ddl_group_t file_group(GroupEntry g) {
  const auto handle = reinterpret_cast<ddl_group_t>(++g_serial);
  g_groups[handle] = std::move(g);
  return handle;
}

std::shared_ptr<Communicator> current() {
  std::lock_guard lock(g_mutex);
  return g_comm;
}

template <typename E>
bool is(const std::exception& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

/// The status an exception stands for: the first of these types it is.
ddl_status_t status_of(const std::exception& e) {
  namespace comm = ddl::comm;
  if (is<comm::ArgumentError>(e)) return DDL_ERR_ARGUMENT;
  if (is<comm::BootstrapError>(e)) return DDL_ERR_BOOTSTRAP;
  if (is<comm::transport::TransportError>(e)) return DDL_ERR_TRANSPORT;
  if (is<comm::TopologyError>(e)) return DDL_ERR_TOPOLOGY;
  if (is<comm::device::DeviceError>(e)) return DDL_ERR_DEVICE;
  if (is<comm::MismatchError>(e)) return DDL_ERR_MISMATCH;
  if (is<comm::CheckError>(e)) return DDL_ERR_CHECK;
  if (is<std::invalid_argument>(e)) return DDL_ERR_ARGUMENT;
  return DDL_ERR_INTERNAL;
}

/// Runs `fn`, turning an exception into its status with its message in g_last_error ("internal
/// error: " before it when it is none of libddl's).
template <typename Fn>
ddl_status_t guarded(Fn&& fn) {
  g_last_error.clear();
  try {
    return fn();
  } catch (const std::exception& e) {
    const ddl_status_t status = status_of(e);
    g_last_error = status == DDL_ERR_INTERNAL ? std::string("internal error: ") + e.what()
                                              : std::string(e.what());
    return status;
  }
}

/// A copy of `group`'s entry when it is live, else an empty one.
GroupEntry find_group(ddl_group_t group) {
  std::lock_guard lock(g_mutex);
  const auto it = g_groups.find(group);
  return it == g_groups.end() ? GroupEntry{} : it->second;
}

/// Runs `fn(target)` on `group`'s communicator (the job) or subgroup, or fails with
/// DDL_ERR_STATE (not initialised) or DDL_ERR_ARGUMENT (not a live group).
template <typename Fn>
ddl_status_t with_group(const char* what, ddl_group_t group, Fn&& fn) {
  return guarded([&]() -> ddl_status_t {
    const GroupEntry g = find_group(group);
    if (!g.comm) {
      if (!current()) {
        g_last_error = std::string(what) + ": call ddl_init() first";
        return DDL_ERR_STATE;
      }
      g_last_error = std::string(what) +
                     ": not a live group (NULL, destroyed, or made before ddl_finalize()); a rank "
                     "that ddl_group_create() left out gets NULL and must not call the group's "
                     "collectives";
      return DDL_ERR_ARGUMENT;
    }
    if (g.sub) {
      fn(*g.sub);
    } else {
      fn(*g.comm);
    }
    return DDL_SUCCESS;
  });
}

/// `get` of the current communicator, -1 when there is none.
int of_current(int (Communicator::*get)() const) {
  const std::shared_ptr<Communicator> c = current();
  return c ? ((*c).*get)() : -1;
}

// ddl.h's enums are DataType's and ReduceOp's values, in the same order (type_of, op_of).
static_assert(DDL_BOOL == static_cast<int>(ddl::comm::DataType::kBool) &&
              DDL_BOOL + 1 == ddl::comm::kDataTypes && DDL_INT8 == 7 && DDL_UINT16 == 9);
static_assert(DDL_BXOR == static_cast<int>(ddl::comm::ReduceOp::kBxor) &&
              DDL_BXOR + 1 == ddl::comm::kReduceOps && DDL_BAND == 5);

bool valid(ddl_datatype_t t) {
  return t >= DDL_FLOAT32 && t <= DDL_BOOL;
}
bool valid(ddl_op_t o) {
  return o >= DDL_SUM && o <= DDL_BXOR;
}

/// with_group(), after refusing an unknown `type` or (when given) `op` with DDL_ERR_ARGUMENT.
template <typename Fn>
ddl_status_t typed(const char* what, ddl_group_t group, ddl_datatype_t type,
                   std::optional<ddl_op_t> op, Fn&& fn) {
  if (!valid(type) || (op && !valid(*op))) {
    g_last_error =
        std::string(what) + (valid(type) ? ": unknown reduction" : ": unknown data type");
    return DDL_ERR_ARGUMENT;
  }
  return with_group(what, group, std::forward<Fn>(fn));
}

ddl::comm::DataType type_of(ddl_datatype_t t) {
  return static_cast<ddl::comm::DataType>(t);
}
ddl::comm::ReduceOp op_of(ddl_op_t o) {
  return static_cast<ddl::comm::ReduceOp>(o);
}

/// ddl_error_string()'s text for each status.
constexpr std::pair<ddl_status_t, const char*> kStatusTexts[] = {
    {DDL_SUCCESS, "success"},
    {DDL_ERR_ARGUMENT, "invalid argument"},
    {DDL_ERR_STATE, "not initialised, or initialised twice"},
    {DDL_ERR_BOOTSTRAP, "the ranks could not find each other"},
    {DDL_ERR_TRANSPORT, "a peer failed or timed out"},
    {DDL_ERR_TOPOLOGY, "the topology file is missing, unreadable or does not match the job"},
    {DDL_ERR_CHECK, "DDL_CHECK found a wrong result"},
    {DDL_ERR_INTERNAL, "internal error"},
    {DDL_ERR_DEVICE, "a GPU collective failed (NCCL or CUDA)"},
    {DDL_ERR_MISMATCH, "the ranks called different collectives"}};

}  // namespace

extern "C" {

ddl_status_t ddl_init(void) {
  return guarded([]() -> ddl_status_t {
    std::lock_guard lock(g_mutex);
    if (g_comm) {
      g_last_error = "ddl_init: already initialised (call ddl_finalize() first)";
      return DDL_ERR_STATE;
    }
    g_comm = ddl::comm::init_from_environment();
    g_world = file_group(GroupEntry{g_comm, nullptr});
    return DDL_SUCCESS;
  });
}

ddl_status_t ddl_finalize(void) {
  return guarded([]() -> ddl_status_t {
    std::shared_ptr<Communicator> c;
    {
      std::lock_guard lock(g_mutex);
      if (!g_comm) {
        g_last_error = "ddl_finalize: not initialised";
        return DDL_ERR_STATE;
      }
      c = std::move(g_comm);
      g_groups.clear();
      g_world = nullptr;
    }
    c.reset();
    return DDL_SUCCESS;
  });
}

int ddl_initialized(void) {
  return current() ? 1 : 0;
}

int ddl_rank(void) {
  return of_current(&Communicator::rank);
}
int ddl_size(void) {
  return of_current(&Communicator::size);
}
int ddl_local_rank(void) {
  return of_current(&Communicator::local_rank);
}
int ddl_local_size(void) {
  return of_current(&Communicator::local_size);
}
int ddl_local_gpu(void) {
  return of_current(&Communicator::gpu);
}

ddl_status_t ddl_allreduce(const void* send, void* recv, size_t count, ddl_datatype_t type,
                           ddl_op_t op) {
  return typed("ddl_allreduce", ddl_group_world(), type, op,
               [&](auto& g) { g.allreduce(send, recv, count, type_of(type), op_of(op)); });
}

ddl_status_t ddl_allreduce_n(void* const* buffers, const size_t* counts, size_t n,
                             ddl_datatype_t type, ddl_op_t op) {
  return typed("ddl_allreduce_n", ddl_group_world(), type, op,
               [&](auto& g) { g.allreduce_n(buffers, counts, n, type_of(type), op_of(op)); });
}

ddl_status_t ddl_bcast(void* buf, size_t count, ddl_datatype_t type, int root) {
  return typed("ddl_bcast", ddl_group_world(), type, {},
               [&](auto& g) { g.broadcast(buf, count, type_of(type), root); });
}

ddl_status_t ddl_allgather(const void* send, void* recv, size_t count, ddl_datatype_t type) {
  return typed("ddl_allgather", ddl_group_world(), type, {},
               [&](auto& g) { g.allgather(send, recv, count, type_of(type)); });
}

ddl_status_t ddl_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                ddl_datatype_t type, ddl_op_t op) {
  return typed("ddl_reduce_scatter", ddl_group_world(), type, op, [&](auto& g) {
    g.reduce_scatter(send, recv, recv_count, type_of(type), op_of(op));
  });
}

ddl_status_t ddl_barrier(void) {
  return with_group("ddl_barrier", ddl_group_world(), [&](auto& g) { g.barrier(); });
}

ddl_status_t ddl_send(const void* buf, size_t count, ddl_datatype_t type, int peer, int tag) {
  return ddl_group_send(ddl_group_world(), buf, count, type, peer, tag);
}

ddl_status_t ddl_recv(void* buf, size_t count, ddl_datatype_t type, int peer, int tag) {
  return ddl_group_recv(ddl_group_world(), buf, count, type, peer, tag);
}

ddl_status_t ddl_recv_any(void* buf, size_t count, ddl_datatype_t type, int tag, int* source) {
  return ddl_group_recv_any(ddl_group_world(), buf, count, type, tag, source);
}

ddl_status_t ddl_alltoall(const void* send, void* recv, size_t count, ddl_datatype_t type) {
  return ddl_group_alltoall(ddl_group_world(), send, recv, count, type);
}

ddl_status_t ddl_alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                           void* recv, const size_t* recv_counts, const size_t* recv_displs,
                           ddl_datatype_t type) {
  return ddl_group_alltoallv(ddl_group_world(), send, send_counts, send_displs, recv, recv_counts,
                             recv_displs, type);
}

ddl_status_t ddl_allgatherv(const void* send, size_t send_count, void* recv,
                            const size_t* recv_counts, const size_t* recv_displs,
                            ddl_datatype_t type) {
  return ddl_group_allgatherv(ddl_group_world(), send, send_count, recv, recv_counts, recv_displs,
                              type);
}

ddl_status_t ddl_group_create(const int* ranks, int n, ddl_group_t* group) {
  return guarded([&]() -> ddl_status_t {
    if (group == nullptr || (n > 0 && ranks == nullptr) || n < 1) {
      g_last_error = "ddl_group_create: needs at least one rank and a place for the group";
      return DDL_ERR_ARGUMENT;
    }
    *group = nullptr;
    const std::shared_ptr<Communicator> c = current();
    if (!c) {
      g_last_error = "ddl_group_create: call ddl_init() first";
      return DDL_ERR_STATE;
    }
    std::shared_ptr<ddl::comm::Subgroup> sub =
        c->create_group(std::span<const int>(ranks, static_cast<size_t>(n)));
    if (!sub) return DDL_SUCCESS;  // not a member
    std::lock_guard lock(g_mutex);
    if (g_comm != c) {
      g_last_error = "ddl_group_create: ddl_finalize() was called meanwhile";
      return DDL_ERR_STATE;
    }
    *group = file_group(GroupEntry{c, std::move(sub)});
    return DDL_SUCCESS;
  });
}

ddl_status_t ddl_group_destroy(ddl_group_t group) {
  return guarded([&]() -> ddl_status_t {
    if (group == nullptr) return DDL_SUCCESS;
    std::lock_guard lock(g_mutex);
    const auto it = g_groups.find(group);
    if (it == g_groups.end() || group == g_world) {
      g_last_error = group == g_world ? "ddl_group_destroy: the world group is ddl_finalize()'s"
                                      : "ddl_group_destroy: not a live group (destroyed twice, "
                                        "or made before ddl_finalize())";
      return DDL_ERR_ARGUMENT;
    }
    g_groups.erase(it);
    return DDL_SUCCESS;
  });
}

ddl_group_t ddl_group_world(void) {
  std::lock_guard lock(g_mutex);
  return g_world;
}

int ddl_group_rank(ddl_group_t group) {
  const GroupEntry g = find_group(group);
  return !g.comm ? -1 : g.sub ? g.sub->rank() : g.comm->rank();
}

int ddl_group_size(ddl_group_t group) {
  const GroupEntry g = find_group(group);
  return !g.comm ? -1 : g.sub ? g.sub->size() : g.comm->size();
}

int ddl_group_global_rank(ddl_group_t group, int group_rank) {
  const int size = ddl_group_size(group);
  if (group_rank < 0 || group_rank >= size) return -1;
  const GroupEntry g = find_group(group);
  return g.sub ? g.sub->global(group_rank) : group_rank;
}

ddl_status_t ddl_group_set_timeout(ddl_group_t group, double seconds) {
  if (!(seconds > 0 && seconds <= 1e9)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", seconds);
    g_last_error =
        "ddl_group_set_timeout: " + std::string(text) + " is not a timeout (seconds, more than 0)";
    return DDL_ERR_ARGUMENT;
  }
  return with_group("ddl_group_set_timeout", group, [&](auto& g) {
    if constexpr (std::is_same_v<std::decay_t<decltype(g)>, ddl::comm::Subgroup>) {
      g.set_timeout(std::chrono::milliseconds(std::max<int64_t>(1, std::llround(seconds * 1e3))));
    } else {
      throw ddl::comm::ArgumentError(
          "ddl_group_set_timeout: the world group keeps DDL_TIMEOUT; make a group of every rank "
          "with ddl_group_create() for a timeout of its own");
    }
  });
}

ddl_status_t ddl_group_allreduce(ddl_group_t group, const void* send, void* recv, size_t count,
                                 ddl_datatype_t type, ddl_op_t op) {
  return typed("ddl_group_allreduce", group, type, op,
               [&](auto& g) { g.allreduce(send, recv, count, type_of(type), op_of(op)); });
}

ddl_status_t ddl_group_allreduce_n(ddl_group_t group, void* const* buffers, const size_t* counts,
                                   size_t n, ddl_datatype_t type, ddl_op_t op) {
  return typed("ddl_group_allreduce_n", group, type, op,
               [&](auto& g) { g.allreduce_n(buffers, counts, n, type_of(type), op_of(op)); });
}

ddl_status_t ddl_group_bcast(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                             int root) {
  return typed("ddl_group_bcast", group, type, {},
               [&](auto& g) { g.broadcast(buf, count, type_of(type), root); });
}

ddl_status_t ddl_group_allgather(ddl_group_t group, const void* send, void* recv, size_t count,
                                 ddl_datatype_t type) {
  return typed("ddl_group_allgather", group, type, {},
               [&](auto& g) { g.allgather(send, recv, count, type_of(type)); });
}

ddl_status_t ddl_group_allgatherv(ddl_group_t group, const void* send, size_t send_count,
                                  void* recv, const size_t* recv_counts, const size_t* recv_displs,
                                  ddl_datatype_t type) {
  return typed("ddl_allgatherv", group, type, {}, [&](auto& g) {
    // alltoallv with the same block for every rank: its count check is allgatherv's.
    const std::vector<size_t> counts(static_cast<size_t>(g.size()), send_count);
    const std::vector<size_t> at_start(counts.size(), 0);
    g.alltoallv(send, counts.data(), at_start.data(), recv, recv_counts, recv_displs,
                type_of(type));
  });
}

ddl_status_t ddl_group_reduce_scatter(ddl_group_t group, const void* send, void* recv,
                                      size_t recv_count, ddl_datatype_t type, ddl_op_t op) {
  return typed("ddl_group_reduce_scatter", group, type, op, [&](auto& g) {
    g.reduce_scatter(send, recv, recv_count, type_of(type), op_of(op));
  });
}

ddl_status_t ddl_group_barrier(ddl_group_t group) {
  return with_group("ddl_group_barrier", group, [&](auto& g) { g.barrier(); });
}

ddl_status_t ddl_group_alltoall(ddl_group_t group, const void* send, void* recv, size_t count,
                                ddl_datatype_t type) {
  return typed("ddl_alltoall", group, type, {},
               [&](auto& g) { g.alltoall(send, recv, count, type_of(type)); });
}

ddl_status_t ddl_group_alltoallv(ddl_group_t group, const void* send, const size_t* send_counts,
                                 const size_t* send_displs, void* recv, const size_t* recv_counts,
                                 const size_t* recv_displs, ddl_datatype_t type) {
  return typed("ddl_alltoallv", group, type, {}, [&](auto& g) {
    g.alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs, type_of(type));
  });
}

ddl_status_t ddl_group_send(ddl_group_t group, const void* buf, size_t count, ddl_datatype_t type,
                            int peer, int tag) {
  return typed("ddl_send", group, type, {},
               [&](auto& g) { g.send(buf, count, type_of(type), peer, tag); });
}

ddl_status_t ddl_group_recv(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                            int peer, int tag) {
  return typed("ddl_recv", group, type, {},
               [&](auto& g) { g.recv(buf, count, type_of(type), peer, tag); });
}

ddl_status_t ddl_group_recv_any(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                                int tag, int* source) {
  return typed("ddl_recv_any", group, type, {}, [&](auto& g) {
    const int from = g.recv_any(buf, count, type_of(type), tag);
    if (source != nullptr) *source = from;
  });
}

const char* ddl_error_string(ddl_status_t status) {
  return ddl::base::lookup(kStatusTexts, status).value_or("unknown status");
}

void* ddl_alloc(size_t bytes) {
  void* p = nullptr;
  const ddl_status_t status = guarded([&]() -> ddl_status_t {
    p = ddl::comm::shared_alloc(bytes);
    return DDL_SUCCESS;
  });
  return status == DDL_SUCCESS ? p : nullptr;
}

ddl_status_t ddl_free(void* p) {
  return guarded([&]() -> ddl_status_t {
    ddl::comm::shared_free(p);
    return DDL_SUCCESS;
  });
}

const char* ddl_last_error(void) {
  return g_last_error.c_str();
}

}  // extern "C"
