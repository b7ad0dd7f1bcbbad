/* The smallest libddl program: every rank contributes its rank number, and every rank prints
 * the sum, where it runs, and how long the runtime took to wire the ranks together.
 *
 *   ddlrun -H localhost:4 build/examples/hello_allreduce
 */
#include <ddl/ddl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
  const double start = now();
  ddl_status_t s = ddl_init();
  if (s != DDL_SUCCESS) {
    fprintf(stderr, "ddl_init: %s\n", ddl_last_error());
    return 1;
  }
  const double init = now() - start;
  double value = ddl_rank(), slowest = init;
  s = ddl_allreduce(&value, &value, 1, DDL_FLOAT64, DDL_SUM);
  if (s == DDL_SUCCESS) s = ddl_allreduce(&slowest, &slowest, 1, DDL_FLOAT64, DDL_MAX);
  if (s != DDL_SUCCESS) {
    fprintf(stderr, "ddl_allreduce: %s\n", ddl_last_error());
    return 1;
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  printf("rank %d of %d on %s (local rank %d of %d): sum of ranks = %g, init %.3f s (slowest %.3f s)\n",
         ddl_rank(), ddl_size(), host, ddl_local_rank(), ddl_local_size(), value, init, slowest);
  ddl_finalize();
  return 0;
}
