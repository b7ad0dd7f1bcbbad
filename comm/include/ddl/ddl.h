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
  DDL_ERR_ARGUMENT = 1,  /* a null buffer, an unknown type or op, an op the type does not take,
                            a root out of range */
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
  DDL_UINT8 = 6,
  DDL_INT8 = 7,
  DDL_INT16 = 8,
  DDL_UINT16 = 9,
  DDL_BOOL = 10 /* one byte: 0 is false, anything else true; a reduction over two or more
                   ranks writes 0 or 1 */
} ddl_datatype_t;

/* Integers wrap (sum, prod) and DDL_AVG truncates their wrapped sum toward zero. DDL_BAND,
 * DDL_BOR and DDL_BXOR are bitwise and take the integer types and DDL_BOOL only. On DDL_BOOL,
 * DDL_SUM and DDL_MAX are a logical or, DDL_PROD and DDL_MIN a logical and, and DDL_AVG is
 * refused. A refused pair returns DDL_ERR_ARGUMENT. */
typedef enum {
  DDL_SUM = 0,
  DDL_AVG = 1,
  DDL_MIN = 2,
  DDL_MAX = 3,
  DDL_PROD = 4,
  DDL_BAND = 5,
  DDL_BOR = 6,
  DDL_BXOR = 7
} ddl_op_t;

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

/* recv = op over every rank's send, `count` elements. send == recv works in place.
 *
 * GPU buffers (cudaMalloc'd; every buffer of a call on the same device) run through NCCL on a
 * stream of libddl's that waits for the work queued before on the legacy default stream (a
 * plain cudaMemcpy or kernel launch); work on the caller's other streams must be synchronized
 * before the call. Every call returns once the GPU is done with the buffers. */
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

/* ---- Point to point (any two ranks) ----
 * `count` elements to (from) rank `peer`, matched by `tag` (any int) per sender: a message is
 * received by the first ddl_recv() from its sender with its tag, in the order sent; messages
 * with other tags wait aside meanwhile. ddl_send() returns once the data has been handed to the
 * transport (it may wait for the receiver when the link's buffer is full). The receiver's
 * count and type must equal the sender's: when they differ the message is dropped and
 * ddl_recv() fails with DDL_ERR_MISMATCH naming the sender. A dead peer, or no progress for
 * $DDL_TIMEOUT seconds, fails with DDL_ERR_TRANSPORT naming it. Messages use links of their
 * own: they never mix with the collectives, which may run meanwhile on other threads. */
ddl_status_t ddl_send(const void* buf, size_t count, ddl_datatype_t type, int peer, int tag);
ddl_status_t ddl_recv(void* buf, size_t count, ddl_datatype_t type, int peer, int tag);
/* A receive from any source: the first message under `tag` from whichever other rank sends
 * one (in each sender's order, as ddl_recv()); *source (when not NULL) is set to its sender.
 * It waits on every other rank at once, including those that have sent this rank nothing yet,
 * beside ddl_recv() calls on other threads. Errors as ddl_recv()'s, except that a rank that has
 * ended is left out: DDL_ERR_TRANSPORT comes when no message arrives for $DDL_TIMEOUT seconds
 * (naming the ranks waited on, and those that sent nothing) or when every other rank is gone. */
ddl_status_t ddl_recv_any(void* buf, size_t count, ddl_datatype_t type, int tag, int* source);

/* recv (size * count elements) = the count-element block for this rank from every rank's send
 * (size * count elements, block r for rank r), by rank. */
ddl_status_t ddl_alltoall(const void* send, void* recv, size_t count, ddl_datatype_t type);
/* The variable-size form: this rank sends send_counts[r] elements from send + send_displs[r]
 * to rank r and receives recv_counts[r] elements from rank r at recv + recv_displs[r]
 * (counts and displacements in elements, each array `size` long). Rank r's send_counts[q]
 * must equal rank q's recv_counts[r]; when they differ every rank fails with
 * DDL_ERR_MISMATCH naming the pair. */
ddl_status_t ddl_alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                           void* recv, const size_t* recv_counts, const size_t* recv_displs,
                           ddl_datatype_t type);

/* allgather with a size per rank (Horovod's allgather of tensors whose first dimension
 * differs): rank r's send (send_count elements) lands at recv + recv_displs[r], and
 * recv_counts[r] must be rank r's send_count (else every rank fails with DDL_ERR_MISMATCH;
 * it runs as an alltoallv, which the message names). */
ddl_status_t ddl_allgatherv(const void* send, size_t send_count, void* recv,
                            const size_t* recv_counts, const size_t* recv_displs,
                            ddl_datatype_t type);

/* ---- Groups: communicators over a subset of the ranks ----
 * A group's members are job ranks; member i (its group rank) is ranks[i]. Collectives on a
 * group involve its members only and are called by every member in the same order; roots and
 * peers are group ranks. Several groups may exist at once and overlap; each group's calls are
 * numbered and checked on their own (a rank calling another group's collective, or another
 * collective, fails with DDL_ERR_MISMATCH as for the job). Calls of different groups are
 * serialised in a process (one collective at a time): ranks shared by two groups must call
 * them in the same order. */
typedef struct ddl_group* ddl_group_t;

/* Makes the group of `n` distinct ranks `ranks` (in group-rank order). Every member makes its
 * groups with the same lists in the same order; a rank that is not in the list gets
 * *group = NULL, so every rank of the job may call it (as torch.distributed.new_group does) or
 * only the members. Nothing is sent and no collective running on another thread holds it up:
 * members agree on the group's id from the list alone, and members whose lists differ fail the
 * group's first collective with DDL_ERR_MISMATCH. */
ddl_status_t ddl_group_create(const int* ranks, int n, ddl_group_t* group);
/* Frees a group made by ddl_group_create() (local: no communication). NULL is ignored.
 * ddl_finalize() frees the groups still alive; their handles are then invalid. */
ddl_status_t ddl_group_destroy(ddl_group_t group);
/* The group of every rank, in rank order: its calls are the job's (ddl_allreduce() ...).
 * NULL before ddl_init(). */
ddl_group_t ddl_group_world(void);
/* This rank's group rank, and the number of members; -1 for an invalid group. */
int ddl_group_rank(ddl_group_t group);
int ddl_group_size(ddl_group_t group);
/* The job rank of member `group_rank`; -1 when out of range or the group is invalid. */
int ddl_group_global_rank(ddl_group_t group, int group_rank);
/* Gives the group's collectives a timeout of their own: a call fails with DDL_ERR_TRANSPORT
 * ("rank 1 (node2): no progress for 1 s") once a transfer has made no progress for `seconds`
 * (more than 0), where the job's calls keep $DDL_TIMEOUT. Local (each member sets its own; a
 * member that does not keeps $DDL_TIMEOUT), for the calls made after it; messages keep
 * $DDL_TIMEOUT. The world group refuses (DDL_ERR_ARGUMENT): make a group of every rank. */
ddl_status_t ddl_group_set_timeout(ddl_group_t group, double seconds);

/* The collectives above, on a group's members (roots and peers are group ranks). */
ddl_status_t ddl_group_allreduce(ddl_group_t group, const void* send, void* recv, size_t count,
                                 ddl_datatype_t type, ddl_op_t op);
ddl_status_t ddl_group_allreduce_n(ddl_group_t group, void* const* buffers, const size_t* counts,
                                   size_t n, ddl_datatype_t type, ddl_op_t op);
ddl_status_t ddl_group_bcast(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                             int root);
ddl_status_t ddl_group_allgather(ddl_group_t group, const void* send, void* recv, size_t count,
                                 ddl_datatype_t type);
ddl_status_t ddl_group_allgatherv(ddl_group_t group, const void* send, size_t send_count,
                                  void* recv, const size_t* recv_counts, const size_t* recv_displs,
                                  ddl_datatype_t type);
ddl_status_t ddl_group_reduce_scatter(ddl_group_t group, const void* send, void* recv,
                                      size_t recv_count, ddl_datatype_t type, ddl_op_t op);
ddl_status_t ddl_group_barrier(ddl_group_t group);
ddl_status_t ddl_group_alltoall(ddl_group_t group, const void* send, void* recv, size_t count,
                                ddl_datatype_t type);
ddl_status_t ddl_group_alltoallv(ddl_group_t group, const void* send, const size_t* send_counts,
                                 const size_t* send_displs, void* recv, const size_t* recv_counts,
                                 const size_t* recv_displs, ddl_datatype_t type);
/* Tags are the group's own: a group's messages never match another group's. */
ddl_status_t ddl_group_send(ddl_group_t group, const void* buf, size_t count, ddl_datatype_t type,
                            int peer, int tag);
ddl_status_t ddl_group_recv(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                            int peer, int tag);
/* ddl_recv_any() among the group's other members; *source is the sender's group rank. */
ddl_status_t ddl_group_recv_any(ddl_group_t group, void* buf, size_t count, ddl_datatype_t type,
                                int tag, int* source);

/* ---- Shared buffers ----
 * `bytes` of zeroed memory (page aligned) that the other ranks of this host can map. An
 * in-place allreduce (send == recv, or send copied into recv first) on a host where every
 * rank's buffer lies in such memory takes a single pass: each rank reduces its share of the
 * buffer from the others' buffers where they lie and writes the result into all of them, with
 * no copy through libddl's own shared memory (the fastest a one-host allreduce can be; see
 * libddl(3)). Ranks may mix such buffers with ordinary ones: the call is as exact as ever,
 * only the copies of the shared ones are saved. Any thread may call these, without
 * ddl_init(). ddl_alloc returns NULL (ddl_last_error() says why: 0 bytes, more than the
 * host's memory, or the kernel's refusal) on failure. ddl_free(NULL) does nothing; freeing
 * anything else than ddl_alloc's pointer, twice, or while a collective uses the buffer fails
 * with DDL_ERR_ARGUMENT and frees nothing. */
void* ddl_alloc(size_t bytes);
ddl_status_t ddl_free(void* p);

/* A fixed description of a status ("a peer failed or timed out"). */
const char* ddl_error_string(ddl_status_t status);
/* The calling thread's last error message, "" when none. Valid until its next ddl_ call. */
const char* ddl_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DDL_DDL_H */
