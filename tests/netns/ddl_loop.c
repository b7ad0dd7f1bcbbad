/* A libddl training-like loop for the reliability tests (tests/launcher/tests.cmake): every rank
 * allreduces 1024 floats every 20 ms and checks the sum, for argv[1] seconds (default 600; the
 * ranks stop together, at the first step after any rank's time is up).
 * At the start each rank prints "rank R pid P" (tests signal one rank by its pid), and then
 * "rank R step S" once a second. DDL_LOOP_EXIT_RANK=R: rank R exits 0 after
 * DDL_LOOP_EXIT_STEP (default 5) steps, leaving the others inside a collective. */
#include <ddl/ddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void ok(ddl_status_t s, const char* what) {
  if (s != DDL_SUCCESS) {
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", ddl_rank(), what, ddl_error_string(s),
            ddl_last_error());
    exit(1);
  }
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 600;
  setvbuf(stdout, NULL, _IOLBF, 0);
  ok(ddl_init(), "ddl_init");
  const int rank = ddl_rank(), size = ddl_size();
  printf("rank %d pid %d\n", rank, (int)getpid());
  const char* exit_rank = getenv("DDL_LOOP_EXIT_RANK");
  const char* exit_step = getenv("DDL_LOOP_EXIT_STEP");
  const long leave_at = exit_step ? atol(exit_step) : 5;
  float buf[1024];
  const double start = now_s();
  double next_print = start;
  // The ranks stop together: each adds 1 to the last element once its time is up, and every
  // rank leaves after the first allreduce whose sum has it (a rank that stopped on its own
  // clock alone left a slower peer inside one more allreduce, failing it).
  for (long step = 0;; ++step) {
    if (exit_rank != NULL && atoi(exit_rank) == rank && step == leave_at) {
      printf("rank %d leaving at step %ld (DDL_LOOP_EXIT_RANK)\n", rank, step);
      return 0;
    }
    for (int i = 0; i < 1023; ++i) buf[i] = (float)(rank + 1);
    buf[1023] = now_s() - start < seconds ? 0.0f : 1.0f;
    ok(ddl_allreduce(buf, buf, 1024, DDL_FLOAT32, DDL_SUM), "allreduce");
    if (buf[0] != (float)size * (float)(size + 1) / 2.0f) {
      fprintf(stderr, "rank %d: wrong sum %g at step %ld\n", rank, buf[0], step);
      return 1;
    }
    if (buf[1023] > 0.0f) break;
    if (now_s() >= next_print) {
      printf("rank %d step %ld\n", rank, step);
      next_print += 1.0;
    }
    usleep(20000);
  }
  ok(ddl_finalize(), "ddl_finalize");
  return 0;
}
