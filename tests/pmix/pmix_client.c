/* A PMIx client for ddlrun's PMIx server: each rank checks what PMIx says it is against what
 * ddlrun planned ($DDL_RANK, $DDL_SIZE, $DDL_LOCAL_RANK, $DDL_LOCAL_SIZE), puts a key,
 * commits, fences, and gets every peer's key back. Prints one line per rank and exits 0 when
 * everything matched, 1 (with the reason on stderr) when not.
 *
 *   pmix_client [collect|nocollect]    fence with or without data collection (nocollect: the
 *                                      Gets of other hosts' keys go through direct modex)
 * Environment:
 *   PMIX_CLIENT_TIMEOUT=S    PMIX_TIMEOUT of the fence, in seconds (default none)
 *   PMIX_CLIENT_ABORT=R      rank R calls PMIx_Abort(7, "rank R gives up") instead of fencing
 *   PMIX_CLIENT_SKIP=R       rank R never enters the fence (sleeps 60 s, then exits 0)
 */
#include <pmix.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

static void fail(const char* what, pmix_status_t rc) {
  fprintf(stderr, "pmix_client rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
  exit(1);
}

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

/* A number PMIx holds for `proc` under `key`, whatever its integer type. */
static long get_number(const pmix_proc_t* proc, const char* key) {
  pmix_value_t* v = NULL;
  pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
  if (rc != PMIX_SUCCESS || v == NULL) fail(key, rc);
  long n = -1;
  switch (v->type) {
    case PMIX_UINT32: n = (long)v->data.uint32; break;
    case PMIX_UINT16: n = (long)v->data.uint16; break;
    case PMIX_INT: n = (long)v->data.integer; break;
    case PMIX_PROC_RANK: n = (long)v->data.rank; break;
    default: fprintf(stderr, "pmix_client: %s has type %d\n", key, (int)v->type); exit(1);
  }
  PMIX_VALUE_RELEASE(v);
  return n;
}

/* What PMIx says this rank is. */
struct identity {
  long size, local_size, local_rank, node_rank, appnum;
};

/* Reads this rank's identity from PMIx; false (with the reason on stderr) when it is not what
 * ddlrun planned. */
static int check_identity(struct identity* id) {
  pmix_proc_t job;
  PMIX_PROC_LOAD(&job, me.nspace, PMIX_RANK_WILDCARD);
  id->size = get_number(&job, PMIX_JOB_SIZE);
  id->local_size = get_number(&job, PMIX_LOCAL_SIZE);
  id->local_rank = get_number(&me, PMIX_LOCAL_RANK);
  id->node_rank = get_number(&me, PMIX_NODE_RANK);
  id->appnum = get_number(&me, PMIX_APPNUM);
  if ((long)me.rank != env_int("DDL_RANK", -1) || id->size != env_int("DDL_SIZE", -1) ||
      id->local_rank != env_int("DDL_LOCAL_RANK", -1) ||
      id->local_size != env_int("DDL_LOCAL_SIZE", -1) || id->node_rank != id->local_rank ||
      id->appnum != 0) {
    fprintf(stderr,
            "pmix_client: PMIx says rank %u of %ld, local %ld of %ld (node rank %ld, app %ld); "
            "ddlrun planned rank %s of %s, local %s of %s\n",
            me.rank, id->size, id->local_rank, id->local_size, id->node_rank, id->appnum,
            getenv("DDL_RANK"), getenv("DDL_SIZE"), getenv("DDL_LOCAL_RANK"),
            getenv("DDL_LOCAL_SIZE"));
    return 0;
  }
  return 1;
}

/* Puts "ddltest.R" = "value of rank R in NSPACE" and commits it. */
static void put_key(void) {
  static char key[64], value[320];
  snprintf(key, sizeof key, "ddltest.%u", me.rank);
  snprintf(value, sizeof value, "value of rank %u in %s", me.rank, me.nspace);
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_STRING;
  v.data.string = value;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
  if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) fail("PMIx_Put/Commit", rc);
}

/* PMIX_CLIENT_ABORT and PMIX_CLIENT_SKIP: true when this rank does not fence. */
static int leaves_before_the_fence(void) {
  if ((int)me.rank == env_int("PMIX_CLIENT_ABORT", -1)) {
    char why[64];
    snprintf(why, sizeof why, "rank %u gives up", me.rank);
    PMIx_Abort(7, why, NULL, 0);
    sleep(60); /* the launcher ends this process */
    return 1;
  }
  if ((int)me.rank == env_int("PMIX_CLIENT_SKIP", -1)) {
    sleep(60);
    return 1;
  }
  return 0;
}

/* The fence, collecting data or not, with PMIX_CLIENT_TIMEOUT. */
static void fence(int collect) {
  pmix_info_t info[2];
  size_t ninfo = 0;
  bool flag = collect ? true : false;
  int timeout = env_int("PMIX_CLIENT_TIMEOUT", 0);
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[ninfo], PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
  ++ninfo;
  if (timeout > 0) {
    PMIX_INFO_LOAD(&info[ninfo], PMIX_TIMEOUT, &timeout, PMIX_INT);
    ++ninfo;
  }
  pmix_status_t rc = PMIx_Fence(NULL, 0, info, ninfo);
  if (rc != PMIX_SUCCESS) fail("PMIx_Fence", rc);
}

/* Gets every rank's key back; false (with the reason on stderr) on the first one that is wrong. */
static int check_keys(long size) {
  for (long r = 0; r < size; ++r) {
    pmix_proc_t peer;
    PMIX_PROC_LOAD(&peer, me.nspace, (pmix_rank_t)r);
    char want[320], peer_key[64];
    snprintf(peer_key, sizeof peer_key, "ddltest.%ld", r);
    snprintf(want, sizeof want, "value of rank %ld in %s", r, me.nspace);
    pmix_value_t* got = NULL;
    pmix_status_t rc = PMIx_Get(&peer, peer_key, NULL, 0, &got);
    if (rc != PMIX_SUCCESS || got == NULL) {
      fprintf(stderr, "pmix_client rank %u: Get of rank %ld's key: %s\n", me.rank, r,
              PMIx_Error_string(rc));
      return 0;
    }
    if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0) {
      fprintf(stderr, "pmix_client rank %u: rank %ld's key holds '%s', not '%s'\n", me.rank, r,
              got->type == PMIX_STRING ? got->data.string : "(not a string)", want);
      return 0;
    }
    PMIX_VALUE_RELEASE(got);
  }
  return 1;
}

int main(int argc, char** argv) {
  const int collect = argc < 2 || strcmp(argv[1], "nocollect") != 0;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) fail("PMIx_Init", rc);
  struct identity id;
  if (!check_identity(&id)) return 1;
  put_key();
  if (leaves_before_the_fence()) return 0;
  fence(collect);
  if (!check_keys(id.size)) return 1;
  /* A second fence, without data, as MPI_Finalize does. */
  rc = PMIx_Fence(NULL, 0, NULL, 0);
  if (rc != PMIX_SUCCESS) fail("the second PMIx_Fence", rc);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  printf("pmix_client: rank %u of %ld, local %ld of %ld on %s: %s fence, %ld keys ok\n", me.rank,
         id.size, id.local_rank, id.local_size, host, collect ? "collecting" : "non-collecting",
         id.size);
  rc = PMIx_Finalize(NULL, 0);
  if (rc != PMIX_SUCCESS) fail("PMIx_Finalize", rc);
  return 0;
}
