/* ddl-bench: libddl's collectives timed and checked, in nccl-tests' layout. Every rank runs it:
 *
 *   ddlrun -H localhost:4 build/bench/comm/ddl-bench -b 8 -e 256M -f 2 -t float32 -o sum \
 *     -w 5 -n 20
 *
 * and rank 0 prints, per message size: size (bytes), count, type, op, time (us, mean of the
 * timed collectives, the slowest rank's), algbw (GB/s = size / time), busbw (algbw times
 * 2(n-1)/n for allreduce, (n-1)/n for allgather and reducescatter, 1 for bcast) and #wrong
 * (elements that differ from the exact result, checked after the timed loop). -a picks
 * allreduce, allgather, reducescatter or bcast; -h lists every option. -G puts the buffers in
 * GPU memory (the GPU libddl's NCCL uses for the rank, cudaMalloc through the CUDA runtime opened
 * with dlopen: cuda_memory.h), so that libddl runs them through NCCL (its comm/device path);
 * filling and checking go through host copies outside the timed loop. -S takes the buffers
 * from ddl_alloc and runs allreduce in place on them (libddl's single pass on one host).
 *
 * How it works: ddl_init() (timed; the "init" line shows the slowest rank's), then bench_run()
 * (bench_common.h) with a backend whose run is one ddl_ call. Allreduce runs out of place (send
 * -> recv), so the values stay those of the pattern however many times it runs.
 */
#include <ddl/ddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "cuda_memory.h"

/* Writes "CALL: ddl_last_error()" into err when status is not DDL_SUCCESS; returns status. */
static int ddl_error(ddl_status_t status, const char* call, char* err, size_t err_len) {
  if (status == DDL_SUCCESS) return 0;
  snprintf(err, err_len, "%s: %s (%s)", call, ddl_last_error(), ddl_error_string(status));
  return (int)status;
}

static int ddl_run(void* ctx, bench_coll coll, const void* send, void* recv, size_t count,
                   bench_type type, bench_op op, char* err, size_t err_len) {
  (void)ctx;
  ddl_datatype_t t = (ddl_datatype_t)type;
  switch (coll) {
    case BENCH_ALLREDUCE:
      return ddl_error(ddl_allreduce(send, recv, count, t, (ddl_op_t)op), "ddl_allreduce", err,
                       err_len);
    case BENCH_ALLGATHER:
      return ddl_error(ddl_allgather(send, recv, count, t), "ddl_allgather", err, err_len);
    case BENCH_REDUCESCATTER:
      return ddl_error(ddl_reduce_scatter(send, recv, count, t, (ddl_op_t)op), "ddl_reduce_scatter",
                       err, err_len);
    case BENCH_BCAST:
      return ddl_error(ddl_bcast((void*)send, count, t, 0), "ddl_bcast", err, err_len);
    case BENCH_COLL_COUNT:
      break;
  }
  snprintf(err, err_len, "unknown collective %d", (int)coll);
  return 1;
}

static int ddl_run_barrier(void* ctx, char* err, size_t err_len) {
  (void)ctx;
  return ddl_error(ddl_barrier(), "ddl_barrier", err, err_len);
}

/* The CUDA device libddl runs this rank's NCCL on (comm/core/communicator.cc): the mapper's GPU
 * as $CUDA_VISIBLE_DEVICES renumbers it (its position in the list; 0 when the list names one
 * GPU), else the local rank. */
static int rank_device(void) {
  int gpu = ddl_local_gpu();
  if (gpu < 0) return ddl_local_rank();
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible == NULL || *visible == '\0') return gpu;
  char want[16];
  snprintf(want, sizeof(want), "%d", gpu);
  int entries = 0, found = -1;
  for (const char* p = visible; p != NULL; ++entries) {
    const char* comma = strchr(p, ',');
    size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    if (found < 0 && len == strlen(want) && strncmp(p, want, len) == 0) found = entries;
    p = comma != NULL ? comma + 1 : NULL;
  }
  return found >= 0 ? found : entries == 1 ? 0 : gpu;
}

/* The options of ddl-bench's own: -G and -S. */
typedef struct {
  int gpu_buffers;
  int shared_buffers;
} ddl_bench_flags;

static int take_option(void* ctx, int opt, const char* arg) {
  (void)arg;
  ddl_bench_flags* f = (ddl_bench_flags*)ctx;
  if (opt == 'G') {
    f->gpu_buffers = 1;
  } else if (opt == 'S') {
    f->shared_buffers = 1;
  } else {
    return 1;
  }
  return 0;
}

/* -S: the buffers from ddl_alloc (zeroed already). */
static void* shared_alloc(size_t bytes) {
  void* p = ddl_alloc(bytes);
  if (p == NULL) fprintf(stderr, "ddl-bench: error: ddl_alloc: %s\n", ddl_last_error());
  return p;
}

static void shared_free(void* p) {
  if (ddl_free(p) != DDL_SUCCESS) fprintf(stderr, "ddl-bench: error: %s\n", ddl_last_error());
}

int main(int argc, char** argv) {
  bench_options o;
  ddl_bench_flags flags = {0, 0};
  bench_extra_options extra = {
      "GS", take_option, &flags,
      "  -G         buffers in GPU memory (this rank's GPU, through libcudart): libddl's NCCL "
      "path\n"
      "  -S         buffers from ddl_alloc (shared memory the host's ranks map), allreduce in "
      "place:\n             libddl's single pass when every rank of the host passes one\n"};
  int status = bench_parse_options(argc, argv, "ddl-bench", &o, &extra);
  if (status != 0) return status == 1 ? 0 : 2;

  double start = bench_now_us();
  ddl_status_t init = ddl_init();
  o.init_ms = (bench_now_us() - start) / 1e3;
  o.init_what = "ddl_init";
  if (init != DDL_SUCCESS) {
    fprintf(stderr, "ddl-bench: error: ddl_init: %s (%s)\n", ddl_last_error(),
            ddl_error_string(init));
    return 1;
  }

  bench_backend b = {0};
  b.rank = ddl_rank();
  b.nranks = ddl_size();
  b.name = "ddl";
  b.run = ddl_run;
  b.barrier = ddl_run_barrier;
  b.types = (1u << BENCH_TYPE_COUNT) - 1;
  b.ops = (1u << BENCH_OP_COUNT) - 1;
  b.colls = (1u << BENCH_COLL_COUNT) - 1;
  if (flags.shared_buffers) {
    b.in_place = 1;
    b.host_alloc = shared_alloc;
    b.host_free = shared_free;
  }
  if (flags.gpu_buffers) {
    char err[512];
    b.memory = bench_cuda_memory(rank_device(), err, sizeof(err));
    if (b.memory == NULL) {
      fprintf(stderr, "ddl-bench: error: rank %d: %s\n", b.rank, err);
      ddl_finalize();
      return 1;
    }
  }
  status = bench_run(&o, &b, stdout);
  ddl_finalize();
  return status;
}
