/* GPU memory for the benchmarks' buffers through the CUDA runtime opened with dlopen
 * (cuda_memory.h says how it works). */
#include "cuda_memory.h"

#include <dlfcn.h>
#include <stdio.h>

/* The CUDA runtime's calls used here, with its prototypes (cudaError_t is an int; cudaMemcpy's
 * kinds are 1 host to device and 2 device to host). */
static struct {
  int (*malloc_)(void** p, size_t bytes);
  int (*free_)(void* p);
  int (*memcpy_)(void* dst, const void* src, size_t bytes, int kind);
  int (*set_device)(int device);
  int (*device_count)(int* count);
  const char* (*error_string)(int error);
} cuda;

static void* cuda_alloc(size_t bytes, char* err, size_t err_len) {
  void* p = NULL;
  int e = cuda.malloc_(&p, bytes);
  if (e != 0) {
    snprintf(err, err_len, "cudaMalloc(%zu bytes): %s", bytes, cuda.error_string(e));
    return NULL;
  }
  return p;
}

static void cuda_release(void* p) {
  cuda.free_(p);
}

static int cuda_copy(void* dst, const void* src, size_t bytes, int to_memory, char* err,
                     size_t err_len) {
  int e = cuda.memcpy_(dst, src, bytes, to_memory ? 1 : 2);
  if (e == 0) return 0;
  snprintf(err, err_len, "cudaMemcpy(%zu bytes, %s): %s", bytes,
           to_memory ? "host to device" : "device to host", cuda.error_string(e));
  return 1;
}

static const bench_memory cuda_memory = {"cuda", cuda_alloc, cuda_release, cuda_copy};

/* dlopen of the first CUDA runtime found; NULL with dlerror()'s words in err. */
static void* open_cudart(char* err, size_t err_len) {
  static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) return h;
  }
  snprintf(err, err_len,
           "-G: the CUDA runtime could not be loaded (%s); install CUDA or add its lib64 to "
           "LD_LIBRARY_PATH",
           dlerror());
  return NULL;
}

const bench_memory* bench_cuda_memory(int device, char* err, size_t err_len) {
  void* h = open_cudart(err, err_len);
  if (h == NULL) return NULL;
  *(void**)&cuda.malloc_ = dlsym(h, "cudaMalloc");
  *(void**)&cuda.free_ = dlsym(h, "cudaFree");
  *(void**)&cuda.memcpy_ = dlsym(h, "cudaMemcpy");
  *(void**)&cuda.set_device = dlsym(h, "cudaSetDevice");
  *(void**)&cuda.device_count = dlsym(h, "cudaGetDeviceCount");
  *(void**)&cuda.error_string = dlsym(h, "cudaGetErrorString");
  if (!cuda.malloc_ || !cuda.free_ || !cuda.memcpy_ || !cuda.set_device || !cuda.device_count ||
      !cuda.error_string) {
    snprintf(err, err_len, "-G: the CUDA runtime lacks cudaMalloc, cudaMemcpy or friends");
    return NULL;
  }
  int n = 0;
  int e = cuda.device_count(&n);
  if (e != 0 || n == 0) {
    snprintf(err, err_len, "-G: no GPU on this host (cudaGetDeviceCount: %s)",
             e != 0 ? cuda.error_string(e) : "0 devices");
    return NULL;
  }
  if ((e = cuda.set_device(device)) != 0) {
    snprintf(err, err_len, "-G: cudaSetDevice(%d) of %d GPU(s): %s", device, n,
             cuda.error_string(e));
    return NULL;
  }
  return &cuda_memory;
}
