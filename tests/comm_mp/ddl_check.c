/* A C program that every rank of a real job runs (tests/comm_mp/run_check.sh starts it through ddlrun
 * and mpirun): it checks identity and every collective against values it can compute itself,
 * and prints one line "rank R of N ok <bootstrap-independent summary>" or exits 1 with the
 * failure. Written in C to keep ddl.h honest as a C header. */
#include <ddl/ddl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "rank %d: check failed: ", ddl_rank()); \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      ++failures;                                         \
    }                                                     \
  } while (0)

static void ok(ddl_status_t s, const char* what) {
  if (s != DDL_SUCCESS) {
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", ddl_rank(), what, ddl_error_string(s),
            ddl_last_error());
    exit(1);
  }
}

static void check_identity(int rank, int size) {
  CHECK(rank >= 0 && rank < size, "rank %d of %d", rank, size);
  const char* env_rank = getenv("RANK");
  if (env_rank) CHECK(atoi(env_rank) == rank, "RANK=%s but ddl_rank()=%d", env_rank, rank);
  CHECK(ddl_local_rank() >= 0 && ddl_local_rank() < ddl_local_size(), "local rank");

  /* DDL_CHECK_DIE_RANK=R: rank R leaves just before the first allreduce (a test of failure). */
  const char* die = getenv("DDL_CHECK_DIE_RANK");
  if (die != NULL && atoi(die) == rank) {
    fprintf(stderr, "rank %d: leaving on purpose (DDL_CHECK_DIE_RANK)\n", rank);
    _exit(9);
  }
}

/* allreduce sum/max of float32 over an odd count, out of place and in place */
static void check_large_allreduce(size_t big, int rank, int size) {
  float* in = malloc(big * sizeof(float));
  float* out = malloc(big * sizeof(float));
  for (size_t i = 0; i < big; ++i) in[i] = (float)(rank + 1) * (float)(i % 7);
  ok(ddl_allreduce(in, out, big, DDL_FLOAT32, DDL_SUM), "allreduce sum");
  const float tri = (float)size * (float)(size + 1) / 2.0f;
  for (size_t i = 0; i < big; ++i) {
    if (out[i] != tri * (float)(i % 7)) {
      CHECK(0, "sum element %zu: %g != %g", i, out[i], tri * (float)(i % 7));
      break;
    }
  }
  ok(ddl_allreduce(in, in, big, DDL_FLOAT32, DDL_MAX), "allreduce max in place");
  for (size_t i = 0; i < big; ++i) {
    if (in[i] != (float)size * (float)(i % 7)) {
      CHECK(0, "max element %zu: %g", i, in[i]);
      break;
    }
  }
  free(in);
  free(out);
}

/* small messages (latency path) with int64 and min, float64 avg, int16 and bool */
static void check_small_allreduce(int rank, int size) {
  int64_t small[3] = {rank, -rank, 100 + rank};
  ok(ddl_allreduce(small, small, 3, DDL_INT64, DDL_MIN), "allreduce min");
  CHECK(small[0] == 0 && small[1] == -(size - 1) && small[2] == 100, "min %lld %lld %lld",
        (long long)small[0], (long long)small[1], (long long)small[2]);
  double avg = rank;
  ok(ddl_allreduce(&avg, &avg, 1, DDL_FLOAT64, DDL_AVG), "allreduce avg");
  CHECK(avg == (size - 1) / 2.0, "avg %g", avg);
  /* the narrow types: int16 bxor (bit r from rank r), bool prod (an and) and sum (an or) */
  int16_t bits[2] = {(int16_t)(1u << (rank % 16)), -1}, want = 0;
  for (int r = 0; r < size; ++r) want = (int16_t)(want ^ (int16_t)(1u << (r % 16)));
  ok(ddl_allreduce(bits, bits, 2, DDL_INT16, DDL_BXOR), "allreduce bxor");
  CHECK(bits[0] == want && bits[1] == (size % 2 ? -1 : 0), "bxor %d %d", bits[0], bits[1]);
  uint8_t flags[2] = {1, rank == size - 1};
  ok(ddl_allreduce(flags, flags, 2, DDL_BOOL, DDL_PROD), "allreduce bool prod");
  CHECK(flags[0] == 1 && flags[1] == (size == 1), "bool prod %d %d", flags[0], flags[1]);
  flags[1] = rank == size - 1;
  ok(ddl_allreduce(flags, flags, 2, DDL_BOOL, DDL_SUM), "allreduce bool sum");
  CHECK(flags[0] == 1 && flags[1] == 1, "bool sum %d %d", flags[0], flags[1]);
  CHECK(ddl_allreduce(&avg, &avg, 1, DDL_FLOAT64, DDL_BAND) == DDL_ERR_ARGUMENT &&
            strcmp(ddl_last_error(), "allreduce: reduce op band is bitwise: it takes integer "
                                     "and bool types, not float64") == 0,
        "float64 band: %s", ddl_last_error());
}

/* allreduce_n: three buffers fused */
static void check_allreduce_n(int rank, int size) {
  int32_t a[5], b[1], c[1000];
  for (int i = 0; i < 5; ++i) a[i] = rank;
  b[0] = 1;
  for (int i = 0; i < 1000; ++i) c[i] = i;
  void* bufs[3] = {a, b, c};
  size_t counts[3] = {5, 1, 1000};
  ok(ddl_allreduce_n(bufs, counts, 3, DDL_INT32, DDL_SUM), "allreduce_n");
  CHECK(a[4] == size * (size - 1) / 2 && b[0] == size && c[999] == 999 * size, "allreduce_n");
}

/* broadcast from the last rank */
static void check_bcast(int rank, int size) {
  uint8_t msg[300];
  memset(msg, rank == size - 1 ? 7 : 0, sizeof msg);
  ok(ddl_bcast(msg, sizeof msg, DDL_UINT8, size - 1), "bcast");
  CHECK(msg[0] == 7 && msg[299] == 7, "bcast %d", msg[0]);
}

/* allgather of (rank, rank*rank) */
static void check_allgather(int rank, int size) {
  int32_t mine[2] = {rank, rank * rank};
  int32_t* all = malloc(sizeof(int32_t) * 2 * (size_t)size);
  ok(ddl_allgather(mine, all, 2, DDL_INT32), "allgather");
  for (int r = 0; r < size; ++r) CHECK(all[2 * r] == r && all[2 * r + 1] == r * r, "allgather %d", r);
  free(all);
}

/* reduce_scatter: element j of chunk r is r + j from every rank */
static void check_reduce_scatter(int rank, int size) {
  const size_t per = 3;
  float* rs_in = malloc(sizeof(float) * per * (size_t)size);
  float rs_out[3];
  for (int r = 0; r < size; ++r)
    for (size_t j = 0; j < per; ++j) rs_in[(size_t)r * per + j] = (float)(r + (int)j);
  ok(ddl_reduce_scatter(rs_in, rs_out, per, DDL_FLOAT32, DDL_SUM), "reduce_scatter");
  for (size_t j = 0; j < per; ++j)
    CHECK(rs_out[j] == (float)(size * (rank + (int)j)), "reduce_scatter %zu: %g", j, rs_out[j]);
  free(rs_in);
}

/* errors are status codes with a message */
static void check_errors(int size) {
  uint8_t msg[1] = {0};
  CHECK(ddl_bcast(msg, 1, DDL_UINT8, size) == DDL_ERR_ARGUMENT, "bad root accepted");
  CHECK(strstr(ddl_last_error(), "root") != NULL, "message: %s", ddl_last_error());
}

/* messages: a ring shift (send to the next, then receive from the previous) and two tags
 * received in the other order */
static void check_messages(int rank, int size) {
  if (size < 2) return;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int64_t out[2] = {rank, 1000 + rank}, in[2] = {-1, -1};
  ok(ddl_send(&out[0], 1, DDL_INT64, next, 1), "send tag 1");
  ok(ddl_send(&out[1], 1, DDL_INT64, next, 2), "send tag 2");
  ok(ddl_recv(&in[1], 1, DDL_INT64, prev, 2), "recv tag 2");
  ok(ddl_recv(&in[0], 1, DDL_INT64, prev, 1), "recv tag 1");
  CHECK(in[0] == prev && in[1] == 1000 + prev, "messages from %d: %lld %lld", prev,
        (long long)in[0], (long long)in[1]);
  float f[4] = {0};
  if (rank == 1) ok(ddl_send(f, 4, DDL_FLOAT32, 0, 9), "send 4");
  if (rank == 0) {
    CHECK(ddl_recv(f, 3, DDL_FLOAT32, 1, 9) == DDL_ERR_MISMATCH, "a short recv accepted");
    CHECK(strstr(ddl_last_error(), "rank 1 sent 4 elements of float32, this rank expects 3") !=
              NULL,
          "message: %s", ddl_last_error());
  }
}

/* alltoall (block j of rank r is r*100+j) and alltoallv (rank r sends j+1 elements to j) */
static void check_alltoall(int rank, int size) {
  int32_t* send = malloc(sizeof(int32_t) * (size_t)size * (size_t)(size + 1));
  int32_t* recv = malloc(sizeof(int32_t) * (size_t)size * (size_t)(size + 1));
  for (int j = 0; j < size; ++j) send[j] = rank * 100 + j;
  ok(ddl_alltoall(send, recv, 1, DDL_INT32), "alltoall");
  for (int j = 0; j < size; ++j) CHECK(recv[j] == j * 100 + rank, "alltoall block %d", j);
  size_t* sc = malloc(sizeof(size_t) * 4 * (size_t)size);
  size_t *sd = sc + size, *rc = sc + 2 * size, *rd = sc + 3 * size;
  size_t st = 0, rt = 0;
  for (int j = 0; j < size; ++j) {
    sc[j] = (size_t)j + 1, sd[j] = st, st += sc[j];
    rc[j] = (size_t)rank + 1, rd[j] = rt, rt += rc[j];
  }
  for (size_t i = 0; i < st; ++i) send[i] = rank;
  ok(ddl_alltoallv(send, sc, sd, recv, rc, rd, DDL_INT32), "alltoallv");
  for (int j = 0; j < size; ++j) CHECK(recv[rd[j]] == j && recv[rd[j] + rank] == j, "v %d", j);
  /* allgatherv: rank j contributes j+1 elements */
  rt = 0;
  for (int j = 0; j < size; ++j) rc[j] = (size_t)j + 1, rd[j] = rt, rt += rc[j];
  ok(ddl_allgatherv(send, (size_t)rank + 1, recv, rc, rd, DDL_INT32), "allgatherv");
  for (int j = 0; j < size; ++j) CHECK(recv[rd[j]] == j && recv[rd[j] + j] == j, "gv %d", j);
  free(sc);
  free(send);
  free(recv);
}

/* groups: every rank calls ddl_group_create for the even and the odd ranks (as torch's
 * new_group does) and uses the one it is in, alternating with the job; a group of itself */
static void check_groups(int rank, int size) {
  int* list = malloc(sizeof(int) * (size_t)size);
  ddl_group_t parity[2] = {NULL, NULL}, self = NULL;
  for (int p = 0; p < 2; ++p) {
    int n = 0;
    for (int r = p; r < size; r += 2) list[n++] = r;
    if (n > 0) ok(ddl_group_create(list, n, &parity[p]), "group_create");
    CHECK((parity[p] != NULL) == (rank % 2 == p), "membership of group %d", p);
  }
  ddl_group_t mine = parity[rank % 2];
  const int members = (size - rank % 2 + 1) / 2;
  CHECK(ddl_group_size(mine) == members && ddl_group_rank(mine) == rank / 2, "group shape");
  CHECK(ddl_group_global_rank(mine, ddl_group_rank(mine)) == rank, "global rank");
  for (int round = 0; round < 3; ++round) {
    int32_t x = rank, w = 1;
    ok(ddl_group_allreduce(mine, &x, &x, 1, DDL_INT32, DDL_MAX), "group allreduce");
    CHECK(x == rank % 2 + 2 * (members - 1), "group max %d", x);
    ok(ddl_allreduce(&w, &w, 1, DDL_INT32, DDL_SUM), "job allreduce");
    CHECK(w == size, "job sum %d", w);
  }
  int32_t v = rank;
  ok(ddl_group_bcast(mine, &v, 1, DDL_INT32, members - 1), "group bcast");
  CHECK(v == rank % 2 + 2 * (members - 1), "group bcast %d", v);
  ok(ddl_group_barrier(ddl_group_world()), "world barrier");
  ok(ddl_group_create(&rank, 1, &self), "group of one");
  ok(ddl_group_allgather(self, &rank, &v, 1, DDL_INT32), "allgather of one");
  for (int p = 0; p < 2; ++p) ok(ddl_group_destroy(parity[p]), "group_destroy");
  ok(ddl_group_destroy(self), "group_destroy");
  CHECK(ddl_group_barrier(self) == DDL_ERR_ARGUMENT &&
            strstr(ddl_last_error(), "ddl_group_barrier: not a live group") != NULL,
        "a destroyed group: %s", ddl_last_error());
  free(list);
}

int main(int argc, char** argv) {
  size_t big = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000003;
  ok(ddl_init(), "ddl_init");
  const int rank = ddl_rank(), size = ddl_size();
  check_identity(rank, size);
  check_large_allreduce(big, rank, size);
  check_small_allreduce(rank, size);
  check_allreduce_n(rank, size);
  check_bcast(rank, size);
  check_allgather(rank, size);
  check_reduce_scatter(rank, size);
  ok(ddl_barrier(), "barrier");
  check_errors(size);
  check_messages(rank, size);
  check_alltoall(rank, size);
  check_groups(rank, size);

  ok(ddl_finalize(), "ddl_finalize");
  CHECK(ddl_rank() == -1, "rank after finalize");
  if (failures == 0) printf("rank %d of %d ok\n", rank, size);
  return failures == 0 ? 0 : 1;
}
