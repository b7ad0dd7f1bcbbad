// The NCCL device runtime: libnccl.so.2 and the CUDA runtime, opened with dlopen so that libddl
// itself links neither and runs on machines without them.
//
// Each Comm owns an NCCL communicator made non-blocking (config.blocking = 0) and a CUDA
// stream of its own, a blocking one (cudaStreamDefault): its work starts only after what the
// process queued before on the legacy default stream, which is where a plain cudaMemcpy or
// kernel launch goes. cudaMemcpy from pageable host memory may return before its DMA has landed
// (the CUDA runtime's documented behaviour), so a non-blocking stream let NCCL read a buffer the
// copy was still writing: the first real H100 run (ddl-bench -G) found wrong elements at 1 MiB.
// Work on other streams of the caller must be synchronized before the call (ddl.h says so; the
// torch backend synchronizes the tensor's current stream). A call enqueues the NCCL operation and
// then polls, until the stream is done, both the stream and ncclCommGetAsyncError; when NCCL
// reports an error, or the operation has not finished within the timeout (a peer died or stopped
// calling collectives), the communicator is aborted (ncclCommAbort, so no kernel is left spinning)
// and DeviceError raised. An aborted communicator refuses every later call. Initialisation is
// polled the same way, so a rank that never joins is an error after the timeout, not a hang.

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/table.h"
#include "comm/device/device.h"

#ifdef DDL_NCCL_PATH
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace ddl::comm::device {

std::string nccl_reduction_error(DataType type, ReduceOp op) {
  if (type == DataType::kInt16 || type == DataType::kUint16) {
    return "GPU buffers of " + std::string(to_string(type)) + ": NCCL has no " +
           std::string(to_string(type)) + " reduction (pass host memory, or int32 on the GPU)";
  }
  const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
  if (bitwise && (type != DataType::kBool || op == ReduceOp::kBxor)) {
    return "GPU buffers: NCCL has no bitwise reduction " + std::string(to_string(op)) + " for " +
           std::string(to_string(type)) + " (pass host memory)";
  }
  return "";
}

#ifndef DDL_NCCL_PATH

std::shared_ptr<Runtime> load_nccl(std::string* why) {
  if (why != nullptr) {
    *why =
        "this libddl was built without the NCCL path (CUDA's and NCCL's headers were not "
        "found at build time; scripts/cuda_headers fetches them, or configure with "
        "-DDDL_CUDA_HOME=DIR)";
  }
  return nullptr;
}

#else

namespace {

#define DDL_CUDA_FUNCTIONS(X)  \
  X(cudaGetDeviceCount)        \
  X(cudaSetDevice)             \
  X(cudaPointerGetAttributes)  \
  X(cudaStreamCreateWithFlags) \
  X(cudaStreamDestroy)         \
  X(cudaStreamQuery)           \
  X(cudaGetErrorString)        \
  X(cudaGetLastError)          \
  X(cudaRuntimeGetVersion)

#define DDL_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)           \
  X(ncclGetUniqueId)          \
  X(ncclCommInitRankConfig)   \
  X(ncclCommGetAsyncError)    \
  X(ncclCommAbort)            \
  X(ncclCommDestroy)          \
  X(ncclAllReduce)            \
  X(ncclReduceScatter)        \
  X(ncclAllGather)            \
  X(ncclBroadcast)            \
  X(ncclGroupStart)           \
  X(ncclGroupEnd)             \
  X(ncclGetErrorString)       \
  X(ncclGetLastError)

/// The functions of both libraries, resolved once.
struct Api {
#define DDL_MEMBER(name) decltype(&::name) name = nullptr;
  DDL_CUDA_FUNCTIONS(DDL_MEMBER)
  DDL_NCCL_FUNCTIONS(DDL_MEMBER)
#undef DDL_MEMBER
  void* cudart = nullptr;
  void* nccl = nullptr;
};

/// dlopen of `soname`, else of the copy next to where the build found the library.
void* open_library(const std::string& soname, const char* build_dir, std::string* error) {
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  *error = dlerror();
  if (build_dir != nullptr && *build_dir != '\0') {
    const std::string path = std::string(build_dir) + "/" + soname;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

constexpr std::pair<DataType, ncclDataType_t> kNcclTypes[] = {
    {DataType::kFloat32, ncclFloat32}, {DataType::kFloat64, ncclFloat64},
    {DataType::kFloat16, ncclFloat16}, {DataType::kBFloat16, ncclBfloat16},
    {DataType::kInt32, ncclInt32},     {DataType::kInt64, ncclInt64},
    {DataType::kUint8, ncclUint8},     {DataType::kInt8, ncclInt8},
    {DataType::kBool, ncclUint8}};

constexpr std::pair<ReduceOp, ncclRedOp_t> kNcclOps[] = {{ReduceOp::kSum, ncclSum},
                                                         {ReduceOp::kAvg, ncclAvg},
                                                         {ReduceOp::kMin, ncclMin},
                                                         {ReduceOp::kMax, ncclMax},
                                                         {ReduceOp::kProd, ncclProd}};

// bool is uint8 holding 0 or 1: or (sum, max, bor) is its max, and (prod, min, band) its min.
constexpr std::pair<ReduceOp, ncclRedOp_t> kNcclBoolOps[] = {
    {ReduceOp::kSum, ncclMax},  {ReduceOp::kMax, ncclMax}, {ReduceOp::kBor, ncclMax},
    {ReduceOp::kProd, ncclMin}, {ReduceOp::kMin, ncclMin}, {ReduceOp::kBand, ncclMin}};

/// NCCL's type for a reduction of `t` (nccl_reduction_error() has refused the others).
ncclDataType_t nccl_type(DataType t) {
  const std::optional<ncclDataType_t> n = base::lookup(kNcclTypes, t);
  DDL_CHECK(n.has_value(), "NCCL reduction of " + std::string(to_string(t)));
  return *n;
}

ncclRedOp_t nccl_op(DataType t, ReduceOp op) {
  const std::optional<ncclRedOp_t> n =
      t == DataType::kBool ? base::lookup(kNcclBoolOps, op) : base::lookup(kNcclOps, op);
  DDL_CHECK(n.has_value(),
            "NCCL reduction " + std::string(to_string(op)) + " of " + std::string(to_string(t)));
  return *n;
}

/// What NCCL moves for `count` elements of `t` that only move (broadcast, allgather): its own
/// type, or bytes where it has none (int16, uint16).
std::pair<ncclDataType_t, size_t> nccl_moved(DataType t, size_t count) {
  if (const std::optional<ncclDataType_t> n = base::lookup(kNcclTypes, t)) return {*n, count};
  return {ncclUint8, count * type_size(t)};
}

class NcclComm : public Comm {
 public:
  NcclComm(std::shared_ptr<const Api> api, ncclComm_t comm, cudaStream_t stream, int size, int rank,
           int gpu, std::chrono::milliseconds timeout)
      : api_(std::move(api)),
        comm_(comm),
        stream_(stream),
        size_(size),
        rank_(rank),
        gpu_(gpu),
        timeout_(timeout) {}

  ~NcclComm() override {
    if (comm_ != nullptr) (aborted_ ? api_->ncclCommAbort : api_->ncclCommDestroy)(comm_);
    if (stream_ != nullptr) api_->cudaStreamDestroy(stream_);
  }

  int size() const override { return size_; }
  int rank() const override { return rank_; }

  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    run("ncclAllReduce", [&] {
      return api_->ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(type, op), comm_,
                                 stream_);
    });
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    run("ncclReduceScatter", [&] {
      return api_->ncclReduceScatter(send, recv, recv_count, nccl_type(type), nccl_op(type, op),
                                     comm_, stream_);
    });
  }
  void allgather(const void* send, void* recv, size_t send_count, DataType type) override {
    const auto [moved, n] = nccl_moved(type, send_count);
    run("ncclAllGather", [&] { return api_->ncclAllGather(send, recv, n, moved, comm_, stream_); });
  }
  void broadcast(void* buf, size_t count, DataType type, int root) override {
    const auto [moved, n] = nccl_moved(type, count);
    run("ncclBroadcast",
        [&] { return api_->ncclBroadcast(buf, buf, n, moved, root, comm_, stream_); });
  }

 private:
  std::string nccl_error(const char* what, ncclResult_t r) const {
    std::string s = std::string(what) + ": " + api_->ncclGetErrorString(r);
    const char* last = api_->ncclGetLastError(comm_);
    if (last != nullptr && *last != '\0') s += " (" + std::string(last) + ")";
    return s;
  }

  [[noreturn]] void fail(const std::string& message) {
    if (!aborted_) {
      aborted_ = true;
      api_->ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    throw DeviceError("rank " + std::to_string(rank_) + " of an NCCL ring of " +
                      std::to_string(size_) + " on GPU " + std::to_string(gpu_) + ": " + message);
  }

  template <typename Enqueue>
  void run(const char* what, Enqueue enqueue) {
    if (aborted_) {
      throw DeviceError(std::string(what) +
                        ": this NCCL communicator was aborted after an earlier error; the job "
                        "cannot go on");
    }
    if (cudaError_t e = api_->cudaSetDevice(gpu_); e != cudaSuccess) {
      throw DeviceError(std::string("cudaSetDevice(") + std::to_string(gpu_) +
                        "): " + api_->cudaGetErrorString(e));
    }
    const ncclResult_t r = enqueue();
    if (r != ncclSuccess && r != ncclInProgress) fail(nccl_error(what, r));
    wait(what);
  }

  void wait(const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int spins = 0;; ++spins) {
      ncclResult_t async = ncclSuccess;
      api_->ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) fail(nccl_error(what, async));
      if (async == ncclSuccess) {
        const cudaError_t q = api_->cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) {
          api_->cudaGetLastError();
          fail(std::string(what) + ": " + api_->cudaGetErrorString(q));
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        fail(std::string(what) + " did not finish within " +
             std::to_string(timeout_.count() / 1000.0).substr(0, 6) +
             " s (DDL_TIMEOUT): a rank of this ring died or stopped calling collectives");
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::shared_ptr<const Api> api_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  int size_;
  int rank_;
  int gpu_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
};

class NcclRuntime : public Runtime {
 public:
  NcclRuntime(std::shared_ptr<const Api> api, std::string describe)
      : api_(std::move(api)), describe_(std::move(describe)) {}

  std::string describe() const override { return describe_; }

  bool is_device_pointer(const void* p) override {
    if (p == nullptr) return false;
    cudaPointerAttributes a{};
    if (api_->cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      api_->cudaGetLastError();  // not a pointer CUDA knows: host memory
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }

  std::string new_id() override {
    ncclUniqueId id;
    if (ncclResult_t r = api_->ncclGetUniqueId(&id); r != ncclSuccess) {
      throw DeviceError(std::string("ncclGetUniqueId: ") + api_->ncclGetErrorString(r) +
                        " (NCCL_SOCKET_IFNAME names the interface NCCL may use)");
    }
    return std::string(id.internal, sizeof id.internal);
  }

  size_t id_bytes() const override { return NCCL_UNIQUE_ID_BYTES; }

  std::unique_ptr<Comm> join(const std::string& id, int size, int rank, int gpu,
                             std::chrono::milliseconds timeout) override {
    const std::string who = "rank " + std::to_string(rank) + " of an NCCL ring of " +
                            std::to_string(size) + " on GPU " + std::to_string(gpu);
    if (id.size() != NCCL_UNIQUE_ID_BYTES) {
      throw DeviceError(who + ": the communicator id is " + std::to_string(id.size()) +
                        " bytes, not " + std::to_string(NCCL_UNIQUE_ID_BYTES));
    }
    if (cudaError_t e = api_->cudaSetDevice(gpu); e != cudaSuccess) {
      throw DeviceError(who + ": cudaSetDevice: " + api_->cudaGetErrorString(e) +
                        " (does the topology file's GPU exist on this host?)");
    }
    cudaStream_t stream = nullptr;
    if (cudaError_t e = api_->cudaStreamCreateWithFlags(&stream, cudaStreamDefault);
        e != cudaSuccess) {
      throw DeviceError(who + ": cudaStreamCreateWithFlags: " + api_->cudaGetErrorString(e));
    }
    ncclUniqueId uid;
    std::memcpy(uid.internal, id.data(), sizeof uid.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = api_->ncclCommInitRankConfig(&comm, size, uid, rank, &config);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (r == ncclInProgress) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      api_->ncclCommGetAsyncError(comm, &r);
    }
    if (r != ncclSuccess) {
      std::string why = r == ncclInProgress
                            ? "not every member joined within " +
                                  std::to_string(timeout.count() / 1000) + " s (DDL_TIMEOUT)"
                            : std::string(api_->ncclGetErrorString(r));
      if (comm != nullptr) {
        const char* last = api_->ncclGetLastError(comm);
        if (last != nullptr && *last != '\0') why += " (" + std::string(last) + ")";
        api_->ncclCommAbort(comm);
      }
      api_->cudaStreamDestroy(stream);
      throw DeviceError(who + ": ncclCommInitRankConfig: " + why);
    }
    return std::make_unique<NcclComm>(api_, comm, stream, size, rank, gpu, timeout);
  }

 private:
  std::shared_ptr<const Api> api_;
  std::string describe_;
};

std::shared_ptr<Runtime> load(std::string* why) {
  const char* off = std::getenv("DDL_NCCL");
  if (off != nullptr && std::string(off) == "0") {
    *why = "$DDL_NCCL is 0";
    return nullptr;
  }
  auto api = std::make_shared<Api>();
  std::string error;
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  api->cudart = open_library(cudart, DDL_CUDA_LIBDIR, &error);
  if (api->cudart == nullptr) {
    *why = cudart + " could not be loaded (" + error +
           "); install the CUDA runtime or add its directory to LD_LIBRARY_PATH";
    return nullptr;
  }
#define DDL_RESOLVE(library, name)                                               \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(api->library, #name)); \
  if (api->name == nullptr) {                                                    \
    *why = std::string(#name) + " is missing from " + #library + " (too old?)";  \
    return nullptr;                                                              \
  }
#define DDL_RESOLVE_CUDA(name) DDL_RESOLVE(cudart, name)
#define DDL_RESOLVE_NCCL(name) DDL_RESOLVE(nccl, name)
  DDL_CUDA_FUNCTIONS(DDL_RESOLVE_CUDA)
  // No GPU (a CI machine with CUDA installed): stop before loading NCCL, which is large.
  int devices = 0;
  if (cudaError_t e = api->cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    *why = e != cudaSuccess
               ? std::string("no GPU: cudaGetDeviceCount: ") + api->cudaGetErrorString(e)
               : std::string("no GPU on this host");
    api->cudaGetLastError();
    return nullptr;
  }
  api->nccl = open_library("libnccl.so.2", DDL_NCCL_LIBDIR, &error);
  if (api->nccl == nullptr) {
    *why = "libnccl.so.2 could not be loaded (" + error +
           "); install NCCL or add its directory to LD_LIBRARY_PATH";
    return nullptr;
  }
  DDL_NCCL_FUNCTIONS(DDL_RESOLVE_NCCL)
#undef DDL_RESOLVE_NCCL
#undef DDL_RESOLVE_CUDA
#undef DDL_RESOLVE
  int nccl_version = 0, cuda_version = 0;
  api->ncclGetVersion(&nccl_version);
  api->cudaRuntimeGetVersion(&cuda_version);
  const std::string describe =
      "nccl " + std::to_string(nccl_version / 10000) + "." +
      std::to_string(nccl_version / 100 % 100) + "." + std::to_string(nccl_version % 100) +
      ", cuda " + std::to_string(cuda_version / 1000) + "." +
      std::to_string(cuda_version / 10 % 100) + ", " + std::to_string(devices) + " GPU(s)";
  return std::make_shared<NcclRuntime>(std::move(api), describe);
}

}  // namespace

std::shared_ptr<Runtime> load_nccl(std::string* why) {
  static std::once_flag once;
  static std::shared_ptr<Runtime> runtime;
  static std::string reason;
  std::call_once(once, [] { runtime = load(&reason); });
  if (why != nullptr) *why = reason;
  return runtime;
}

#endif

}  // namespace ddl::comm::device
