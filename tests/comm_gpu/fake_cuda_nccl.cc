// TEST DOUBLE: a fake libcudart.so.13 and libnccl.so.2, for machines without a GPU (CI).
//
// GPUs cannot exist here, so this file is built twice, as a CUDA runtime and as NCCL with the
// real libraries' names, symbol versions and prototypes (it includes their headers), and put
// first on LD_LIBRARY_PATH. It lets libddl's real NCCL code (comm/device/nccl.cc: dlopen,
// dlsym, non-blocking init, stream polling, abort) and gpu_check run as a real multi-process
// job through ddlrun. "GPU memory" is host memory from the fake cudaMalloc (cudaMemcpy is
// memcpy); "NCCL" collectives meet in a POSIX shared-memory segment per communicator, named by
// the unique id, where every member copies its data into its slot, waits for the others, and
// reduces the slots in member order. Communicator init and every collective report
// ncclInProgress / cudaErrorNotReady once before they finish, as a real asynchronous NCCL does.
// FAKE_NCCL_FAIL_AT=N makes the Nth collective of rank $FAKE_NCCL_FAIL_RANK (default 0) fail
// asynchronously with ncclRemoteError, for the error path. Only what libddl and gpu_check use is
// here; float16/bfloat16 reductions are refused (ncclInvalidArgument). FAKE_NCCL_REPORT=1 makes
// each communicator say at ncclCommDestroy how many collectives it ran.

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#ifdef FAKE_CUDART
namespace {

// ---- CUDA ------------------------------------------------------------------------------------

std::mutex g_mutex;
std::map<uintptr_t, size_t> g_allocations;  // base -> bytes
thread_local cudaError_t g_last = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  g_last = e;
  return e;
}

int device_count() {
  const char* n = std::getenv("FAKE_CUDA_DEVICES");
  return n != nullptr ? std::atoi(n) : 4;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int device) {
  return device >= 0 && device < device_count() ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (fake)";
    case cudaErrorNotReady:
      return "device not ready (fake)";
    case cudaErrorInvalidValue:
      return "invalid argument (fake)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (fake)";
    default:
      return "fake CUDA error";
  }
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  std::lock_guard lock(g_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(*p)] = bytes == 0 ? 1 : bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::lock_guard lock(g_mutex);
  g_allocations.erase(reinterpret_cast<uintptr_t>(p));
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* a, const void* p) {
  std::memset(a, 0, sizeof *a);
  const auto v = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(g_mutex);
  auto it = g_allocations.upper_bound(v);
  if (it != g_allocations.begin()) {
    --it;
    if (v < it->first + it->second) {
      a->type = cudaMemoryTypeDevice;
      a->devicePointer = const_cast<void*>(p);
      return cudaSuccess;
    }
  }
  a->type = cudaMemoryTypeUnregistered;
  a->hostPointer = const_cast<void*>(p);
  return cudaSuccess;
}
struct CUstream_st {
  int polls = 0;
};
/// Refuses cudaStreamNonBlocking: libddl's stream must be ordered after the legacy default
/// stream (comm/device/nccl.cc says why), and this fake's memcpy cannot show the race.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  if (flags != cudaStreamDefault) {
    std::fprintf(stderr,
                 "fake cudart: cudaStreamCreateWithFlags(%#x): libddl's stream must be a "
                 "blocking one (cudaStreamDefault), ordered after the legacy default stream\n",
                 flags);
    return cudaErrorInvalidValue;
  }
  *s = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
/// Not ready on every other query: callers must poll.
cudaError_t cudaStreamQuery(cudaStream_t s) {
  return s->polls++ % 2 == 0 ? cudaErrorNotReady : cudaSuccess;
}

}  // extern "C"
#endif  // FAKE_CUDART

#ifdef FAKE_NCCL

namespace {

constexpr size_t kSlot = 1 << 20;  // bytes each member stages per round

struct Header {
  std::atomic<int> attached;
  std::atomic<int> arrived;
  std::atomic<int> generation;
};

}  // namespace

struct ncclComm {
  int size = 0;
  int rank = 0;
  int polls = 0;  // init and each collective: in progress once
  ncclResult_t async = ncclSuccess;
  std::string error;
  std::string name;
  Header* header = nullptr;
  std::byte* slots = nullptr;
  size_t map_bytes = 0;
  int collectives = 0;
};

namespace {

std::byte* slot(ncclComm* c, int member) {
  return c->slots + kSlot * member;
}

/// Every member waits here until all have come (sense-reversing, spin and yield).
bool barrier(ncclComm* c) {
  const int gen = c->header->generation.load();
  if (c->header->arrived.fetch_add(1) + 1 == c->size) {
    c->header->arrived.store(0);
    c->header->generation.fetch_add(1);
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (c->header->generation.load() == gen) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fake nccl: rank %d waited 120 s for the others\n", c->rank);
      std::abort();
    }
    sched_yield();
  }
  return true;
}

size_t size_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

template <typename T>
void reduce(T* acc, const T* in, size_t n, ncclRedOp_t op) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case ncclSum:
      case ncclAvg:
        acc[i] = static_cast<T>(acc[i] + in[i]);
        break;
      case ncclProd:
        acc[i] = static_cast<T>(acc[i] * in[i]);
        break;
      case ncclMin:
        acc[i] = in[i] < acc[i] ? in[i] : acc[i];
        break;
      case ncclMax:
        acc[i] = in[i] > acc[i] ? in[i] : acc[i];
        break;
      default:
        break;
    }
  }
}

template <typename T>
void average(T* acc, size_t n, int size) {
  for (size_t i = 0; i < n; ++i)
    acc[i] = static_cast<T>(acc[i] / size);
}

bool reduce_any(void* acc, const void* in, size_t n, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclFloat32:
      reduce(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
      return true;
    case ncclFloat64:
      reduce(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
      return true;
    case ncclInt32:
      reduce(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
      return true;
    case ncclInt64:
      reduce(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
      return true;
    case ncclUint8:
      reduce(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(in), n, op);
      return true;
    case ncclInt8:
      reduce(static_cast<int8_t*>(acc), static_cast<const int8_t*>(in), n, op);
      return true;
    default:
      return false;
  }
}

void average_any(void* acc, size_t n, ncclDataType_t t, int size) {
  switch (t) {
    case ncclFloat32:
      return average(static_cast<float*>(acc), n, size);
    case ncclFloat64:
      return average(static_cast<double*>(acc), n, size);
    case ncclInt32:
      return average(static_cast<int32_t*>(acc), n, size);
    case ncclInt64:
      return average(static_cast<int64_t*>(acc), n, size);
    case ncclUint8:
      return average(static_cast<uint8_t*>(acc), n, size);
    case ncclInt8:
      return average(static_cast<int8_t*>(acc), n, size);
    default:
      return;
  }
}

/// Counts this collective; the one FAKE_NCCL_FAIL_AT names fails (asynchronously).
bool injected(ncclComm* c) {
  ++c->collectives;
  const char* at = std::getenv("FAKE_NCCL_FAIL_AT");
  const char* rank = std::getenv("FAKE_NCCL_FAIL_RANK");
  const char* global = std::getenv("DDL_RANK");
  if (at == nullptr || c->collectives != std::atoi(at)) return false;
  if (global == nullptr || std::atoi(global) != (rank != nullptr ? std::atoi(rank) : 0))
    return false;
  c->async = ncclRemoteError;
  c->error = "fake: injected failure";
  return true;
}

/// Stages `bytes` of `in` (all members' inputs, in rounds of kSlot) and lets `use(offset, n)`
/// read every member's slot for that round.
template <typename Use>
void rounds(ncclComm* c, const void* in, size_t bytes, Use use) {
  for (size_t off = 0; off < bytes || off == 0; off += kSlot) {
    const size_t n = std::min(kSlot, bytes - off);
    if (in != nullptr && n > 0)
      std::memcpy(slot(c, c->rank), static_cast<const std::byte*>(in) + off, n);
    barrier(c);
    use(off, n);
    barrier(c);
    if (bytes == 0) break;
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<int> counter{0};
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(
      id->internal, sizeof id->internal, "/fakenccl-%d-%d-%ld", getpid(), counter.fetch_add(1),
      static_cast<long>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  auto* c = new ncclComm;
  c->size = nranks;
  c->rank = rank;
  c->name = id.internal;
  c->map_bytes = 4096 + kSlot * static_cast<size_t>(nranks);
  int fd = -1;
  if (rank == 0) {
    fd = shm_open(c->name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(c->map_bytes)) != 0) {
      close(fd);
      fd = -1;
    }
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    struct stat st {};
    while ((fd = shm_open(c->name.c_str(), O_RDWR, 0600)) < 0 ||
           (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < c->map_bytes)) {
      if (fd >= 0) close(fd);
      fd = -1;
      if (std::chrono::steady_clock::now() > deadline) break;
      usleep(1000);
    }
  }
  if (fd < 0) {
    delete c;
    return ncclSystemError;
  }
  void* p = mmap(nullptr, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    delete c;
    return ncclSystemError;
  }
  c->header = static_cast<Header*>(p);
  c->slots = static_cast<std::byte*>(p) + 4096;
  c->header->attached.fetch_add(1);
  barrier(c);  // everyone attached: the name can go
  if (rank == 0) shm_unlink(c->name.c_str());
  *out = c;
  const bool blocking = config == nullptr || config->blocking != 0;
  if (blocking) return ncclSuccess;
  c->async = ncclInProgress;
  return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r) {
  if (c->async == ncclInProgress && c->polls++ > 0) c->async = ncclSuccess;
  *r = c->async;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (c == nullptr) return ncclSuccess;
  munmap(c->header, c->map_bytes);
  delete c;
  return ncclSuccess;
}

/// With FAKE_NCCL_REPORT=1, says on stderr how many collectives the communicator ran.
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  const char* report = std::getenv("FAKE_NCCL_REPORT");
  if (c != nullptr && report != nullptr && std::strcmp(report, "1") == 0) {
    std::fprintf(stderr, "fake nccl: member %d of %d: %d collectives\n", c->rank, c->size,
                 c->collectives);
  }
  return ncclCommAbort(c);
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error (fake)";
    case ncclInvalidArgument:
      return "invalid argument (fake)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (fake)";
    case ncclSystemError:
      return "unhandled system error (fake)";
    default:
      return "fake NCCL error";
  }
}

const char* ncclGetLastError(ncclComm_t c) {
  return c != nullptr ? c->error.c_str() : "";
}

ncclResult_t ncclGroupStart() {
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (injected(c)) return ncclSuccess;
  const size_t es = size_of(t);
  if (es == 2) return ncclInvalidArgument;
  static thread_local std::byte acc[kSlot];
  rounds(c, send, count * es, [&](size_t off, size_t n) {
    std::memcpy(acc, slot(c, 0), n);
    for (int m = 1; m < c->size; ++m)
      reduce_any(acc, slot(c, m), n / es, t, op);
    if (op == ncclAvg) average_any(acc, n / es, t, c->size);
    // Everyone has read the slots once the round's second barrier passes; write after it.
    std::memcpy(static_cast<std::byte*>(recv) + off, acc, n);
  });
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (injected(c)) return ncclSuccess;
  const size_t es = size_of(t);
  if (es == 2) return ncclInvalidArgument;
  const size_t mine_begin = recv_count * es * static_cast<size_t>(c->rank);
  const size_t mine_end = mine_begin + recv_count * es;
  static thread_local std::byte out[kSlot];
  rounds(c, send, recv_count * es * static_cast<size_t>(c->size), [&](size_t off, size_t n) {
    const size_t b = std::max(off, mine_begin), e = std::min(off + n, mine_end);
    if (b >= e) return;
    std::byte* acc = out;
    std::memcpy(acc, slot(c, 0) + (b - off), e - b);
    for (int m = 1; m < c->size; ++m)
      reduce_any(acc, slot(c, m) + (b - off), (e - b) / es, t, op);
    if (op == ncclAvg) average_any(acc, (e - b) / es, t, c->size);
    std::memcpy(static_cast<std::byte*>(recv) + (b - mine_begin), acc, e - b);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t) {
  if (injected(c)) return ncclSuccess;
  const size_t bytes = send_count * size_of(t);
  rounds(c, send, bytes, [&](size_t off, size_t n) {
    for (int m = 0; m < c->size; ++m)
      std::memcpy(static_cast<std::byte*>(recv) + bytes * static_cast<size_t>(m) + off, slot(c, m),
                  n);
  });
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t) {
  if (injected(c)) return ncclSuccess;
  const size_t bytes = count * size_of(t);
  rounds(c, c->rank == root ? send : nullptr, bytes, [&](size_t off, size_t n) {
    std::memcpy(static_cast<std::byte*>(recv) + off, slot(c, root), n);
  });
  return ncclSuccess;
}

}  // extern "C"

#endif  // FAKE_NCCL
