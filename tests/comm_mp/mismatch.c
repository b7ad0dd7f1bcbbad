/* A job whose ranks disagree: every rank allreduces 10 floats, except rank 1, which passes 11
 * ("count") or 10 doubles ("type"). Each rank prints what its call returned and what a second,
 * matching allreduce returned afterwards:
 *
 *   rank R: allreduce: STATUS: MESSAGE
 *   rank R: next allreduce: STATUS: MESSAGE
 *
 * (STATUS is the ddl_status_t number, MESSAGE ddl_last_error()), then finalises and exits 0,
 * so that check_mismatch.sh sees every rank's lines. */
#include <ddl/ddl.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "count";
  if (ddl_init() != DDL_SUCCESS) {
    fprintf(stderr, "ddl_init: %s\n", ddl_last_error());
    return 1;
  }
  const int rank = ddl_rank();
  double buf[11] = {0};
  size_t count = 10;
  ddl_datatype_t type = DDL_FLOAT32;
  if (rank == 1 && strcmp(what, "count") == 0) count = 11;
  if (rank == 1 && strcmp(what, "type") == 0) type = DDL_FLOAT64;
  ddl_status_t s = ddl_allreduce(buf, buf, count, type, DDL_SUM);
  printf("rank %d: allreduce: %d: %s\n", rank, (int)s, ddl_last_error());
  s = ddl_allreduce(buf, buf, 10, DDL_FLOAT32, DDL_SUM);
  printf("rank %d: next allreduce: %d: %s\n", rank, (int)s, ddl_last_error());
  fflush(stdout);
  ddl_finalize();
  return 0;
}
