#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "base/check.h"
#include "comm/collectives/collectives.h"

namespace ddl::comm::device {

// Collectives on GPU buffers. libddl hands a collective whose buffers live in GPU memory to a
// device runtime (NCCL) instead of its own transports. The runtime sits behind two small
// interfaces so that the algorithm that maps the PowerAI DDL multi-dimensional allreduce onto
// NCCL's collectives runs in unit tests without a GPU (tests/comm/device_test.cc passes a test
// double that "reduces" host memory between threads).

/// A device collective failed, or the device runtime is missing or broken. what() says which
/// call failed, NCCL's or CUDA's own message, and the next step.
using DeviceError = base::Error<struct DeviceErrorTag>;

/// One NCCL communicator: the members of one ring (a dimension of the topology, or the whole
/// job), on this rank's GPU. Every call is collective over those members, returns once the
/// result is in the buffer (the runtime waits on its stream), and throws DeviceError when the
/// operation fails or does not finish within the timeout the communicator was made with.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  /// recv[i] = op over members of send[i]; send == recv is in place.
  virtual void allreduce(const void* send, void* recv, size_t count, DataType type,
                         ReduceOp op) = 0;
  /// Member r gets the reduction of elements [r*recv_count, (r+1)*recv_count) of every
  /// member's send. In place when recv == send + rank * recv_count.
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                              ReduceOp op) = 0;
  /// recv holds every member's send_count elements in member order. In place when
  /// send == recv + rank * send_count.
  virtual void allgather(const void* send, void* recv, size_t send_count, DataType type) = 0;
  /// `count` elements of member root's buf to every member's buf.
  virtual void broadcast(void* buf, size_t count, DataType type, int root) = 0;
};

/// The device library: tells GPU buffers from host buffers and makes communicators.
class Runtime {
 public:
  virtual ~Runtime() = default;
  /// "nccl 2.28.3, cuda 13.0", for messages.
  virtual std::string describe() const = 0;
  /// Whether `p` points into GPU memory (device or managed). Host and unknown pointers: false.
  virtual bool is_device_pointer(const void* p) = 0;
  /// A new communicator id (ncclGetUniqueId), made by one member and sent to the others.
  virtual std::string new_id() = 0;
  /// The size of every id new_id() returns.
  virtual size_t id_bytes() const = 0;
  /// Joins communicator `id` as member `rank` of `size` on GPU `gpu`. Collective over the
  /// members; throws DeviceError when they do not all join within `timeout`.
  virtual std::unique_ptr<Comm> join(const std::string& id, int size, int rank, int gpu,
                                     std::chrono::milliseconds timeout) = 0;
};

/// The CUDA device number of host GPU `gpu` (the topology file's index, as the mapper numbers
/// GPUs) for a process whose $CUDA_VISIBLE_DEVICES is `visible` (nullptr: unset): its position
/// in that list when the list names it, 0 when the list names a single GPU (a launcher such as
/// jsrun or srun gave the rank its own), else `gpu` unchanged.
int visible_device(int gpu, const char* visible);

/// Why NCCL cannot reduce `type` with `op` (allreduce, reduce_scatter) on GPU buffers, "" when
/// it can: NCCL has no int16 or uint16 and no bitwise reductions (bool's band and bor run as
/// its min and max; bxor is refused). Broadcast and allgather take every type (as bytes where
/// NCCL has no such type).
std::string nccl_reduction_error(DataType type, ReduceOp op);

/// NCCL and the CUDA runtime, loaded with dlopen on first use (libddl does not link them, so it
/// runs where they are not installed). Returns nullptr, with `why` saying what was missing, when
/// libddl was built without the NCCL path, when $DDL_NCCL is 0, or when libnccl.so.2,
/// libcudart or a GPU is missing. Loaded once per process.
std::shared_ptr<Runtime> load_nccl(std::string* why);

/// The multi-dimensional allreduce on device memory, as the PowerAI DDL paper does it over
/// NCCL: reduce-scatter along dims[0] (innermost), then along dims[1] on the part this rank
/// owns, ..., allreduce along the outermost dimension, then allgather back out to dims[0].
/// NCCL's reduce-scatter needs equal parts, so the first count - count % (n0 n1 ... n(k-1))
/// elements go that way and the rest through `flat` (the whole job). Floating-point kAvg
/// averages in every step (the grid is regular, so this is the average over the job); integer
/// kAvg, and an empty `dims`, take one allreduce on `flat`. With one dimension this is one
/// allreduce on it.
/// Out of place when send != recv (the first step reads `send`, the rest work on `recv`).
void multi_dim_allreduce(std::span<Comm* const> dims, Comm& flat, const void* send, void* recv,
                         size_t count, DataType type, ReduceOp op);

}  // namespace ddl::comm::device
