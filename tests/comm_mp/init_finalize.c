/* ddl_init() and at once ddl_finalize(), nothing between: every rank must get through even
 * when its neighbours leave straight away (a link is whole only once both sides attached).
 * Prints "rank R of N ok" for run_check.sh. */
#include <ddl/ddl.h>
#include <stdio.h>

int main(void) {
  if (ddl_init() != DDL_SUCCESS) {
    fprintf(stderr, "ddl_init: %s\n", ddl_last_error());
    return 1;
  }
  const int rank = ddl_rank(), size = ddl_size();
  if (ddl_finalize() != DDL_SUCCESS) {
    fprintf(stderr, "ddl_finalize: %s\n", ddl_last_error());
    return 1;
  }
  printf("rank %d of %d ok\n", rank, size);
  return 0;
}
