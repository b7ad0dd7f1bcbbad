/* libddl: the ddlrun runtime's C API.
 *
 * A process started by ddlrun (or mpirun, srun, jsrun, prterun) calls ddl_init() once, then
 * the collectives, then ddl_finalize(). Every call returns a ddl_status_t; DDL_SUCCESS is 0, and
 * ddl_last_error() gives the message of the calling thread's last failure (naming the rank,
 * peer or variable concerned). See libddl(3).
 *
 * Thread safety: the calls may come from any thread, but collectives are serialised: one runs
 * at a time per process, in the same order on every rank.
 */
#ifndef DDL_DDL_H
#define DDL_DDL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  DDL_SUCCESS = 0,
  DDL_ERR_ARGUMENT = 1,  /* a null buffer, an unknown type or op, a root out of range */
  DDL_ERR_STATE = 2,     /* not initialised, or initialised twice */
  DDL_ERR_BOOTSTRAP = 3, /* the ranks could not find each other (names the missing ranks) */
  DDL_ERR_TRANSPORT = 4, /* a peer failed or timed out (names it) */
  DDL_ERR_TOPOLOGY = 5,  /* the topology file is missing, unreadable or does not match */
  DDL_ERR_CHECK = 6,     /* DDL_CHECK found a result that differs from the reference */
  DDL_ERR_INTERNAL = 7,
  DDL_ERR_DEVICE = 8,  /* NCCL or CUDA failed on GPU buffers, or an NCCL peer timed out */
  DDL_ERR_MISMATCH = 9 /* the ranks called different collectives, or with a different count,
                          type, reduction or root (names two ranks and their calls); every
                          later collective fails the same way */
} ddl_status_t;

typedef enum {
  DDL_FLOAT32 = 0,
  DDL_FLOAT64 = 1,
  DDL_FLOAT16 = 2,
  DDL_BFLOAT16 = 3,
  DDL_INT32 = 4,
  DDL_INT64 = 5,
  DDL_UINT8 = 6
} ddl_datatype_t;

typedef enum { DDL_SUM = 0, DDL_AVG = 1, DDL_MIN = 2, DDL_MAX = 3, DDL_PROD = 4 } ddl_op_t;

/* Finds this rank and the job from the launcher's variables, reads the topology file
 * ($DDL_TOPOLOGY_FILE) when there is one, and wires the ranks together (PMIx, else ddlrun's
 * rendezvous). Fails after $DDL_TIMEOUT seconds (default 60) naming the ranks that did not
 * come. A process not started by a launcher fails, unless DDL_ALLOW_SINGLE=1 makes it a job of
 * one rank. */
ddl_status_t ddl_init(void);
/* Releases everything; ddl_init() may be called again afterwards. */
ddl_status_t ddl_finalize(void);
/* 1 between ddl_init() and ddl_finalize(), else 0. */
int ddl_initialized(void);

/* This rank, the number of ranks, this rank among those of its host, their number, and the
 * GPU (CUDA index on this host, -1 for none) the mapper gave it. -1 before ddl_init(). */
int ddl_rank(void);
int ddl_size(void);
int ddl_local_rank(void);
int ddl_local_size(void);
int ddl_local_gpu(void);

/* recv = op over every rank's send, `count` elements. send == recv works in place. */
ddl_status_t ddl_allreduce(const void* send, void* recv, size_t count, ddl_datatype_t type,
                           ddl_op_t op);
/* In place on `n` buffers at once, fused into large buckets (IBM's AllReduceN). */
ddl_status_t ddl_allreduce_n(void* const* buffers, const size_t* counts, size_t n,
                             ddl_datatype_t type, ddl_op_t op);
/* `count` elements of `root`'s buf to every rank's buf. */
ddl_status_t ddl_bcast(void* buf, size_t count, ddl_datatype_t type, int root);
/* recv (size * count elements) = every rank's send (count elements), by rank. */
ddl_status_t ddl_allgather(const void* send, void* recv, size_t count, ddl_datatype_t type);
/* recv (recv_count elements) = this rank's chunk of op over every rank's send (size *
 * recv_count elements). */
ddl_status_t ddl_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                ddl_datatype_t type, ddl_op_t op);
/* Returns once every rank has entered. */
ddl_status_t ddl_barrier(void);

/* A fixed description of a status ("a peer failed or timed out"). */
const char* ddl_error_string(ddl_status_t status);
/* The calling thread's last error message, "" when none. Valid until its next ddl_ call. */
const char* ddl_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DDL_DDL_H */
