/* mpi_allreduce_bench: the ddl-bench table for MPI's collectives, as the baseline ddlrun's
 * allreduce is compared against (bench/allreduce_compare.sh).
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 4 build/bench/comm/mpi_allreduce_bench \
 *     -b 8 -e 256M -f 2 -t float32 -o sum -w 5 -n 20
 *
 * How it works: MPI_Init (timed, the "init" line), then bench_run() (bench_common.h) with a
 * backend that maps each collective onto one MPI call on MPI_COMM_WORLD: MPI_Allreduce,
 * MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast from rank 0. Which algorithm runs is
 * Open MPI's choice (its tuned module picks by size and ranks), as a user of MPI would get.
 * MPI has no float16, bfloat16 or avg; asking for them fails before the sweep. Errors return
 * (MPI_ERRORS_RETURN) so the message names the call.
 */
#include <mpi.h>
#include <stdio.h>

#include "bench_common.h"

/* MPI's type and op for each of bench_common's; the null ones are what MPI lacks, outside the
 * backend's types and ops: never asked for. */
static MPI_Datatype mpi_type(bench_type t) {
  const MPI_Datatype types[BENCH_TYPE_COUNT] = {
      [BENCH_FLOAT32] = MPI_FLOAT,         [BENCH_FLOAT64] = MPI_DOUBLE,
      [BENCH_FLOAT16] = MPI_DATATYPE_NULL, [BENCH_BFLOAT16] = MPI_DATATYPE_NULL,
      [BENCH_INT32] = MPI_INT32_T,         [BENCH_INT64] = MPI_INT64_T,
      [BENCH_UINT8] = MPI_UINT8_T};
  return types[t];
}

static MPI_Op mpi_op(bench_op op) {
  const MPI_Op ops[BENCH_OP_COUNT] = {[BENCH_SUM] = MPI_SUM,
                                      [BENCH_AVG] = MPI_OP_NULL,
                                      [BENCH_MIN] = MPI_MIN,
                                      [BENCH_MAX] = MPI_MAX,
                                      [BENCH_PROD] = MPI_PROD};
  return ops[op];
}

/* Writes "CALL: MPI's message" into err when rc is not MPI_SUCCESS; returns rc. */
static int mpi_error(int rc, const char* call, char* err, size_t err_len) {
  if (rc == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  snprintf(err, err_len, "%s: %.*s", call, len, text);
  return rc;
}

static int mpi_run(void* ctx, bench_coll coll, const void* send, void* recv, size_t count,
                   bench_type type, bench_op op, char* err, size_t err_len) {
  (void)ctx;
  if (count > (size_t)INT32_MAX) {
    snprintf(err, err_len, "%zu elements do not fit MPI's int count", count);
    return 1;
  }
  int n = (int)count;
  MPI_Datatype t = mpi_type(type);
  switch (coll) {
    case BENCH_ALLREDUCE:
      return mpi_error(MPI_Allreduce(send, recv, n, t, mpi_op(op), MPI_COMM_WORLD), "MPI_Allreduce",
                       err, err_len);
    case BENCH_ALLGATHER:
      return mpi_error(MPI_Allgather(send, n, t, recv, n, t, MPI_COMM_WORLD), "MPI_Allgather", err,
                       err_len);
    case BENCH_REDUCESCATTER:
      return mpi_error(MPI_Reduce_scatter_block(send, recv, n, t, mpi_op(op), MPI_COMM_WORLD),
                       "MPI_Reduce_scatter_block", err, err_len);
    case BENCH_BCAST:
      return mpi_error(MPI_Bcast((void*)send, n, t, 0, MPI_COMM_WORLD), "MPI_Bcast", err, err_len);
    case BENCH_COLL_COUNT:
      break;
  }
  snprintf(err, err_len, "unknown collective %d", (int)coll);
  return 1;
}

static int mpi_barrier(void* ctx, char* err, size_t err_len) {
  (void)ctx;
  return mpi_error(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", err, err_len);
}

int main(int argc, char** argv) {
  double start = bench_now_us();
  MPI_Init(&argc, &argv);
  double init_ms = (bench_now_us() - start) / 1e3;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  bench_backend b = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  b.name = "mpi";
  b.run = mpi_run;
  b.barrier = mpi_barrier;
  b.types = 1u << BENCH_FLOAT32 | 1u << BENCH_FLOAT64 | 1u << BENCH_INT32 | 1u << BENCH_INT64 |
            1u << BENCH_UINT8;
  b.ops = 1u << BENCH_SUM | 1u << BENCH_MIN | 1u << BENCH_MAX | 1u << BENCH_PROD;
  b.colls = (1u << BENCH_COLL_COUNT) - 1;

  bench_options o;
  int status = bench_parse_options(argc, argv, "mpi_allreduce_bench", &o, NULL);
  if (status == 0) {
    o.init_ms = init_ms;
    o.init_what = "MPI_Init";
    status = bench_run(&o, &b, stdout);
  } else if (status == 1) {
    status = 0;
  }
  if (status == 3) MPI_Abort(MPI_COMM_WORLD, 3); /* the other ranks may wait in a collective */
  MPI_Finalize();
  return status;
}
