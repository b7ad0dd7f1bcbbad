/* GPU memory for the benchmarks' buffers (ddl-bench -G): a bench_memory over the CUDA runtime.
 *
 * How it works: libcudart (libcudart.so.13, else .so.12, else libcudart.so) is opened with
 * dlopen and its few calls looked up by name, so the benchmarks build without CUDA's headers and
 * run where CUDA is missing; only -G then fails, saying what was missing. The calling process
 * selects GPU `device` (cudaSetDevice) before its first allocation; the buffers are plain
 * cudaMalloc memory, filled and read with cudaMemcpy. */
#pragma once

#include <stddef.h>

#include "bench_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime as a bench_memory on GPU `device`, or NULL after writing why into err (no
 * libcudart, no GPU, or cudaSetDevice refused `device`). */
const bench_memory* bench_cuda_memory(int device, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif
