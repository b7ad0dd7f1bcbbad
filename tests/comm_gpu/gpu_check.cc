// Every collective of libddl on GPU buffers (the NCCL path), checked by each rank against
// values it computes itself. Run through ddlrun by run_gpu.sh on a machine with GPUs; prints
// "rank R of N ok" or exits 1 naming the failure. `gpu_check --count` prints the number of
// GPUs and exits 77 when there is none (the test is then skipped).
#include <cuda_runtime_api.h>
#include <ddl/ddl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int failures = 0;

void ok(ddl_status_t s, const char* what) {
  if (s != DDL_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", ddl_rank(), what, ddl_error_string(s),
                 ddl_last_error());
    std::exit(1);
  }
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rank %d: %s: %s\n", ddl_rank(), what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : count(n) {
    cuda(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(1, n) * sizeof(T)),
         "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void put(const std::vector<T>& v) {
    cuda(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "to GPU");
  }
  std::vector<T> get() const {
    std::vector<T> v(count);
    cuda(cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), "from GPU");
    return v;
  }
  T* ptr = nullptr;
  size_t count;
};

#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::fprintf(stderr, "rank %d: check failed: ", ddl_rank()); \
      std::fprintf(stderr, __VA_ARGS__);                           \
      std::fprintf(stderr, "\n");                                  \
      ++failures;                                                  \
    }                                                              \
  } while (0)

/// `gpu_check --count`: the number of GPUs, 77 when there is none.
int print_gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no GPU\n");
    return 77;
  }
  std::printf("%d\n", n);
  return 0;
}

/// allreduce, float32 sum, in place and out of place, counts that do and do not divide.
void check_float_allreduce(int rank, int size) {
  for (size_t count : {1ul, 7ul, 4096ul, 1000003ul}) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 17));
    DeviceBuffer<float> a(count), b(count);
    a.put(in);
    ok(ddl_allreduce(a.ptr, b.ptr, count, DDL_FLOAT32, DDL_SUM), "allreduce out of place");
    ok(ddl_allreduce(a.ptr, a.ptr, count, DDL_FLOAT32, DDL_SUM), "allreduce in place");
    const float tri = static_cast<float>(size * (size + 1) / 2);
    const std::vector<float> x = a.get(), y = b.get();
    for (size_t i = 0; i < count; ++i) {
      const float want = tri * static_cast<float>(i % 17);
      if (x[i] != want || y[i] != want) {
        CHECK(false, "allreduce of %zu: element %zu is %g/%g, want %g", count, i, x[i], y[i], want);
        break;
      }
    }
  }
}

/// int64 max and avg
void check_int64_allreduce(int rank, int size) {
  DeviceBuffer<int64_t> v(5);
  v.put(std::vector<int64_t>(5, rank * 10));
  ok(ddl_allreduce(v.ptr, v.ptr, 5, DDL_INT64, DDL_MAX), "allreduce max");
  CHECK(v.get()[4] == (size - 1) * 10, "max is %lld", static_cast<long long>(v.get()[4]));
  v.put(std::vector<int64_t>(5, rank * 10));
  ok(ddl_allreduce(v.ptr, v.ptr, 5, DDL_INT64, DDL_AVG), "allreduce avg");
  CHECK(v.get()[0] == (size - 1) * 5, "avg is %lld", static_cast<long long>(v.get()[0]));
}

/// broadcast from the last rank
void check_bcast(int rank, int size) {
  DeviceBuffer<int32_t> v(3);
  v.put(std::vector<int32_t>(3, rank == size - 1 ? 42 : rank));
  ok(ddl_bcast(v.ptr, 3, DDL_INT32, size - 1), "bcast");
  CHECK(v.get() == std::vector<int32_t>(3, 42), "bcast");
}

void check_allgather(int rank, int size) {
  DeviceBuffer<double> mine(2), all(2 * static_cast<size_t>(size));
  mine.put({static_cast<double>(rank), static_cast<double>(rank) + 0.5});
  ok(ddl_allgather(mine.ptr, all.ptr, 2, DDL_FLOAT64), "allgather");
  const std::vector<double> g = all.get();
  for (int r = 0; r < size; ++r)
    CHECK(g[2 * r] == r && g[2 * r + 1] == r + 0.5, "allgather slot %d", r);
}

void check_reduce_scatter(int rank, int size) {
  std::vector<double> in(2 * static_cast<size_t>(size));
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<double>(i);
  DeviceBuffer<double> rs_in(in.size()), rs_out(2);
  rs_in.put(in);
  ok(ddl_reduce_scatter(rs_in.ptr, rs_out.ptr, 2, DDL_FLOAT64, DDL_SUM), "reduce_scatter");
  CHECK(rs_out.get()[1] == static_cast<double>(size) * (2 * rank + 1), "reduce_scatter");
}

/// int8 (NCCL's int8), bool (NCCL's uint8: or as max, and as min), int16 moved as bytes, and
/// int16's reduction refused (NCCL has none) with its text, the job still usable after it.
void check_narrow_types(int rank, int size) {
  DeviceBuffer<int8_t> c(4);
  c.put(std::vector<int8_t>(4, static_cast<int8_t>(-rank)));
  ok(ddl_allreduce(c.ptr, c.ptr, 4, DDL_INT8, DDL_SUM), "int8 allreduce");
  CHECK(c.get()[3] == static_cast<int8_t>(-size * (size - 1) / 2), "int8 sum is %d", c.get()[3]);
  DeviceBuffer<uint8_t> b(2);
  const std::vector<uint8_t> flags{1, static_cast<uint8_t>(rank == size - 1)};
  b.put(flags);
  ok(ddl_allreduce(b.ptr, b.ptr, 2, DDL_BOOL, DDL_BOR), "bool bor");
  CHECK(b.get() == (std::vector<uint8_t>{1, 1}), "bool bor");
  b.put(flags);
  ok(ddl_allreduce(b.ptr, b.ptr, 2, DDL_BOOL, DDL_PROD), "bool prod");
  CHECK(b.get() == (std::vector<uint8_t>{1, static_cast<uint8_t>(size == 1)}), "bool prod");
  DeviceBuffer<int16_t> s(3);
  s.put(std::vector<int16_t>(3, static_cast<int16_t>(rank == 0 ? -300 : rank)));
  ok(ddl_bcast(s.ptr, 3, DDL_INT16, 0), "int16 bcast");
  CHECK(s.get() == std::vector<int16_t>(3, -300), "int16 bcast");
  CHECK(ddl_allreduce(s.ptr, s.ptr, 3, DDL_INT16, DDL_SUM) == DDL_ERR_ARGUMENT &&
            std::strcmp(ddl_last_error(),
                        "allreduce: GPU buffers of int16: NCCL has no int16 reduction (pass host "
                        "memory, or int32 on the GPU)") == 0,
        "int16 allreduce: %s", ddl_last_error());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--count") == 0) return print_gpu_count();
  ok(ddl_init(), "ddl_init");
  const int rank = ddl_rank(), size = ddl_size();
  cuda(cudaSetDevice(ddl_local_gpu() >= 0 ? ddl_local_gpu() : ddl_local_rank()), "cudaSetDevice");
  check_float_allreduce(rank, size);
  check_int64_allreduce(rank, size);
  check_bcast(rank, size);
  check_allgather(rank, size);
  check_reduce_scatter(rank, size);
  check_narrow_types(rank, size);
  ok(ddl_barrier(), "barrier");
  ok(ddl_finalize(), "ddl_finalize");
  if (failures > 0) return 1;
  std::printf("rank %d of %d ok\n", rank, size);
  return 0;
}
