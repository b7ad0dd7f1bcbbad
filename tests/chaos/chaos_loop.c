/* A rank of the chaos suite (chaos.sh): a libddl allreduce loop that faults are injected into.
 *
 * How it works: after ddl_init, the rank forks a grandchild (`sleep`, its stdio on /dev/null)
 * so that the suite can check that no descendant of a rank outlives the job, then writes
 * "PID CHILD_PID HOST" to $CHAOS_DIR/pid.RANK (the suite's signal that the rank is running and
 * whom to hit). It then allreduces CHAOS_COUNT floats (sum) over and over and checks every
 * element; element 0 carries rank 0's "time is up" vote (after CHAOS_SECONDS), so that every
 * rank leaves after the same iteration. Every CHAOS_PRINT_EVERY iterations it prints a line
 * of CHAOS_PRINT_BYTES bytes on stdout (the slow-reader fault). CHAOS_CLOSE_STDOUT=1 closes
 * its stdout after the first iteration and keeps printing (the closed-stdout fault). Any libddl
 * error is printed as "chaos_loop: rank R: <ddl_last_error()>" and ends the rank with status 1;
 * a wrong sum as "chaos_loop: rank R: wrong sum ..." with status 3. */
#include <ddl/ddl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? strtol(v, NULL, 10) : fallback;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(int rank, int status) {
  fprintf(stderr, "chaos_loop: rank %d: %s\n", rank, ddl_last_error());
  exit(status);
}

/* Forks `sleep 300` with its stdio on /dev/null; returns its pid. */
static pid_t start_grandchild(void) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    execlp("sleep", "sleep", "300", (char*)NULL);
    _exit(127);
  }
  return pid;
}

static void write_pid_file(int rank, pid_t child) {
  const char* dir = getenv("CHAOS_DIR");
  if (dir == NULL) return;
  char path[4096], tmp[4100], host[256] = "";
  gethostname(host, sizeof host - 1);
  snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) return;
  fprintf(f, "%d %d %s\n", (int)getpid(), (int)child, host);
  fclose(f);
  rename(tmp, path);
}

int main(void) {
  if (ddl_init() != DDL_SUCCESS) die(-1, 1);
  const int rank = ddl_rank(), size = ddl_size();
  const size_t count = (size_t)env_long("CHAOS_COUNT", 16384);
  const double seconds = (double)env_long("CHAOS_SECONDS", 6);
  const long print_every = env_long("CHAOS_PRINT_EVERY", 50);
  const long print_bytes = env_long("CHAOS_PRINT_BYTES", 40);
  const int close_stdout = env_long("CHAOS_CLOSE_STDOUT", 0) != 0;
  const pid_t child = start_grandchild();
  write_pid_file(rank, child);

  float* buf = malloc(count * sizeof *buf);
  char* line = malloc((size_t)print_bytes + 2);
  memset(line, 'x', (size_t)print_bytes);
  line[print_bytes] = '\0';
  const double start = now_s();
  long iter = 0;
  for (;; ++iter) {
    buf[0] = rank == 0 && now_s() - start >= seconds ? 1.0f : 0.0f;
    for (size_t i = 1; i < count; ++i) buf[i] = (float)(rank + 1) + (float)(i % 7);
    if (ddl_allreduce(buf, buf, count, DDL_FLOAT32, DDL_SUM) != DDL_SUCCESS) die(rank, 1);
    for (size_t i = 1; i < count; ++i) {
      const float want = (float)size * (float)(size + 1) / 2.0f + (float)size * (float)(i % 7);
      if (buf[i] != want) {
        fprintf(stderr, "chaos_loop: rank %d: wrong sum at %zu in iteration %ld: %g, want %g\n",
                rank, i, iter, buf[i], want);
        return 3;
      }
    }
    if (iter % print_every == 0) printf("rank %d iteration %ld %s\n", rank, iter, line);
    if (iter == 0 && close_stdout) {
      fflush(stdout);
      close(1);
    }
    if (buf[0] > 0.0f) break;
  }
  fflush(stdout);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (ddl_finalize() != DDL_SUCCESS) die(rank, 1);
  fprintf(stderr, "chaos_loop: rank %d of %d done after %ld iterations\n", rank, size, iter + 1);
  return 0;
}
