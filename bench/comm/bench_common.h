/* The driver shared by ddl-bench, mpi_allreduce_bench and gloo_allreduce_bench.
 *
 * How it works: each benchmark parses its command line with bench_parse_options(), sets up its
 * library, and hands bench_run() a bench_backend: its rank, the number of ranks, and two calls,
 * run (one collective) and barrier. bench_run() then does the same on every rank, in the same
 * order, for each message size from -b to -e (times -f):
 *
 *   1. fill the send buffer with this rank's value pattern (below);
 *   2. run -w warm-up collectives, a barrier, then -n timed ones; the time of one collective is
 *      the mean over the -n, and the row shows the largest over the ranks (an allreduce MAX
 *      through the backend itself, on one float64);
 *   3. with -c 1, refill the buffers, run the collective once more and count the elements that
 *      differ from the expected value; the row shows the sum over the ranks.
 *
 * With a bench_memory (GPU buffers), steps 1 and 3 fill and check host copies, moved to and
 * from that memory outside the timed loop.
 *
 * Rank 0 prints the table in nccl-tests' layout: size is the whole buffer in bytes (for
 * allgather the gathered result, for reducescatter the input), algbw = size / time and busbw =
 * algbw times the collective's factor (allreduce 2(n-1)/n, allgather and reducescatter (n-1)/n,
 * bcast 1), which compares with the link's bandwidth whatever the number of ranks.
 *
 * The value pattern: element i of rank r is 2 * ((i + r) mod n) + (i mod 3) (for prod: 1 + ((i
 * + r) mod 2)). These are small integers, so every op gives an exact result in every type
 * (their sum n(n-1) + n(i mod 3) divides by n, so avg is exact too), and a misplaced chunk or a
 * rank counted twice changes the result.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In the order of ddl_datatype_t and ddl_op_t, so ddl-bench converts with a cast. */
typedef enum {
  BENCH_FLOAT32 = 0,
  BENCH_FLOAT64 = 1,
  BENCH_FLOAT16 = 2,
  BENCH_BFLOAT16 = 3,
  BENCH_INT32 = 4,
  BENCH_INT64 = 5,
  BENCH_UINT8 = 6,
  BENCH_TYPE_COUNT = 7
} bench_type;

/* The types C has a type for: their bench_type and C type, for X(BENCH_..., type) lists. */
#define BENCH_C_TYPES(X)   \
  X(BENCH_FLOAT32, float)  \
  X(BENCH_FLOAT64, double) \
  X(BENCH_INT32, int32_t)  \
  X(BENCH_INT64, int64_t)  \
  X(BENCH_UINT8, uint8_t)

typedef enum {
  BENCH_SUM = 0,
  BENCH_AVG = 1,
  BENCH_MIN = 2,
  BENCH_MAX = 3,
  BENCH_PROD = 4,
  BENCH_OP_COUNT = 5
} bench_op;

typedef enum {
  BENCH_ALLREDUCE = 0,
  BENCH_ALLGATHER = 1,
  BENCH_REDUCESCATTER = 2,
  BENCH_BCAST = 3,
  BENCH_COLL_COUNT = 4
} bench_coll;

typedef struct {
  size_t min_bytes;      /* -b, default 8 */
  size_t max_bytes;      /* -e, default 256M */
  double factor;         /* -f, default 2 */
  bench_type type;       /* -t, default float32 */
  bench_op op;           /* -o, default sum */
  int warmup;            /* -w, default 5 */
  int iters;             /* -n, default 20 */
  int check;             /* -c, default 1 */
  bench_coll coll;       /* -a, default allreduce */
  double init_ms;        /* set by the benchmark: how long its library took to start */
  const char* init_what; /* what init_ms measured ("ddl_init"), printed in the header */
} bench_options;

/* Where the collectives' buffers live when not in host memory (ddl-bench -G: GPU memory,
 * cuda_memory.h). bench_run() fills and checks host copies and moves them with copy(). */
typedef struct {
  const char* name; /* "cuda": the header line says where the buffers are */
  /* Returns `bytes` of that memory, or NULL after writing the reason into err. */
  void* (*alloc)(size_t bytes, char* err, size_t err_len);
  void (*release)(void* p);
  /* Copies `bytes` from src to dst, into that memory when to_memory, else out of it. Returns 0,
   * or nonzero after writing the reason into err. */
  int (*copy)(void* dst, const void* src, size_t bytes, int to_memory, char* err, size_t err_len);
} bench_memory;

/* What a benchmark provides for its library. */
typedef struct {
  void* ctx; /* passed back to run and barrier */
  int rank;
  int nranks;
  const char* name; /* "ddl", "mpi", "gloo": the header and error messages use it */
  /* Runs `coll` once with `count` elements of `type` (op for allreduce and reducescatter):
   * allreduce: send[count] -> recv[count]; allgather: send[count] -> recv[nranks * count];
   * reducescatter: send[nranks * count] -> recv[count]; bcast: in place on send[count] from
   * rank 0. Returns 0, or nonzero after writing the reason into err (err_len bytes). */
  int (*run)(void* ctx, bench_coll coll, const void* send, void* recv, size_t count,
             bench_type type, bench_op op, char* err, size_t err_len);
  /* Returns once every rank has entered; same error contract as run. */
  int (*barrier)(void* ctx, char* err, size_t err_len);
  /* Bit i set: the library supports type/op/collective i. A request outside fails before any
   * rank starts the sweep. */
  unsigned types;
  unsigned ops;
  unsigned colls;
  /* NULL: the buffers run collectives on are host memory; else they are memory's. */
  const bench_memory* memory;
  /* Nonzero: allreduce runs in place, run(recv, recv), and recv starts with the input too. */
  int in_place;
  /* Set: the host buffers come from host_alloc (zeroed, page aligned; NULL on failure) and go
   * back through host_free (ddl-bench -S: ddl_alloc's shared memory). */
  void* (*host_alloc)(size_t bytes);
  void (*host_free)(void* p);
} bench_backend;

/* Extra options of one benchmark: opts like getopt's ("s:i:"), and a call that takes each one
 * (returns 0, or nonzero after printing why), with a line of help for the usage text. */
typedef struct {
  const char* opts;
  int (*take)(void* ctx, int opt, const char* arg);
  void* ctx;
  const char* help;
} bench_extra_options;

/* Parses argv into o (defaults first). Returns 0 to go on, 1 after printing the help (-h), 2
 * after printing an error ("PROG: error: ...") and the usage to stderr. `extra` may be NULL. */
int bench_parse_options(int argc, char** argv, const char* prog, bench_options* o,
                        const bench_extra_options* extra);

/* Parses "8", "64K", "1M", "256M", "1G" (powers of 1024) into bytes; returns 0 or -1. */
int bench_parse_size(const char* text, size_t* bytes);

/* The size in bytes of one element of t, and the names -t, -o and -a take. */
size_t bench_type_size(bench_type t);
const char* bench_type_name(bench_type t);
const char* bench_op_name(bench_op op);
const char* bench_coll_name(bench_coll c);

/* Runs the sweep of o on b and, on rank 0, prints the table to out. Returns 0 when every
 * collective ran and (with -c 1) every element was right, 1 when an element was wrong, 2 when
 * the options ask for something b does not support (rank 0 says which), 3 when a collective
 * failed (every rank that saw it prints the reason to stderr). */
int bench_run(const bench_options* o, const bench_backend* b, FILE* out);

/* A monotonic clock in microseconds. */
double bench_now_us(void);

#ifdef __cplusplus
}
#endif
