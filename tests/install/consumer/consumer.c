/* A program outside the ddlrun tree, built against an installed libddl: allreduces four floats
 * (rank r contributes (r + 1) * (i + 1)) and prints what it got. Every rank of n ranks should
 * print "rank R of n: 1*s 2*s 3*s 4*s" with s = n (n + 1) / 2. */
#include <ddl/ddl.h>
#include <stdio.h>

int main(void) {
  if (ddl_init() != DDL_SUCCESS) {
    fprintf(stderr, "consumer: ddl_init: %s\n", ddl_last_error());
    return 1;
  }
  const int rank = ddl_rank();
  float x[4];
  for (int i = 0; i < 4; ++i)
    x[i] = (float)((rank + 1) * (i + 1));
  if (ddl_allreduce(x, x, 4, DDL_FLOAT32, DDL_SUM) != DDL_SUCCESS) {
    fprintf(stderr, "consumer: rank %d: ddl_allreduce: %s\n", rank, ddl_last_error());
    ddl_finalize();
    return 1;
  }
  printf("rank %d of %d: %g %g %g %g\n", rank, ddl_size(), x[0], x[1], x[2], x[3]);
  return ddl_finalize() == DDL_SUCCESS ? 0 : 1;
}
