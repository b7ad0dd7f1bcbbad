/* memcpy_bench: how fast N processes copy memory when they all copy at once, the ceiling of a
 * shared-memory collective on this machine.
 *
 *   memcpy_bench -p 4 -b 8 -e 64M -f 4
 *
 * prints one row per size S: the time of one copy of S bytes and the copy rate of one process
 * (S / that time, GB/s = 1e9 bytes/s; the median over the processes and rounds, with the lowest
 * and highest beside it). bench/allreduce_compare.sh turns the rate into the memory limit of an
 * allreduce on N ranks (see its header).
 *
 * How it works: the parent forks -p processes. Each maps two buffers of the largest size and
 * writes them (so no page faults while timed), then, for each size and each of -r rounds, says
 * it is ready on one pipe and waits for the parent's go on another: the parent starts all of
 * them at once. Each then copies S bytes back and forth between its two buffers (a -> b, b ->
 * a, ...) for at least -m milliseconds, so that all copies overlap even when processes outnumber
 * cores (the rate then includes the share of a core each one got, as a rank's would), and
 * writes its rate into a shared table. The parent prints the row once every process is done.
 *
 *   memcpy_bench -x -p 2 -b 1M -e 4M
 *
 * -x measures instead how fast the processes hand each other bytes one of them has just
 * written, the traffic between cores that every shared-memory allreduce with private buffers
 * needs: on 2 ranks each rank must take in S bytes another core wrote (its slice's peer half,
 * then the peer's reduced half), (n-1)/n S twice on n ranks, so busbw can be no higher than
 * the rate at which a rank takes such bytes in. How it works: the processes share two slots
 * each of the node group's size (the L2 cache's, as libddl's auto_chunk_bytes: -c sets it),
 * cut into n pieces, the piece min(slot / n, S / n); a step is the node group's sweep without
 * the reduction: each process waits until every other has read its slot of two steps ago,
 * copies a piece for each other process into its slot, publishes the step, waits for every
 * other's, copies its piece out of every other's slot into its own buffer and says it took
 * them. Waits spin, then yield the core (so that more processes than cores still progress).
 * Process 0 ends a round after -m ms at a step all of them reach. The rate is the bytes one
 * process took in per second (median, lowest and highest over processes and rounds, as above).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

typedef struct {
  int procs;        /* -p, default 2 */
  size_t min_bytes; /* -b, default 8 */
  size_t max_bytes; /* -e, default 64M */
  double factor;    /* -f, default 2 */
  int rounds;       /* -r, default 5 */
  double min_ms;    /* -m, default 100 */
  int exchange;     /* -x: the rate of bytes taken in from other cores */
  size_t chunk;     /* -c: a process's slot under -x, default the L2 cache's size */
  double give_up_s; /* -g: -x's wait for another process at most, default 10 */
} options;

static void usage(FILE* f) {
  fprintf(
      f,
      "usage: memcpy_bench [-x [-c SLOT] [-g SECS]] [-p PROCS] [-b MIN] [-e MAX] [-f FACTOR]\n"
      "                    [-r ROUNDS] [-m MS]\n"
      "  -x         measure the exchange instead: bytes each process takes in per second that\n"
      "             the others have just written, through shared slots (see the source's head)\n"
      "  -c SLOT    -x: a process's slot in bytes (default the L2 cache's size, 256K to 4M)\n"
      "  -g SECS    -x: a process that waits SECS for another gives up (default 10)\n"
      "  -p PROCS   processes copying at once (default 2)\n"
      "  -b MIN     smallest copy in bytes; K, M, G multiply by 1024^k (default 8)\n"
      "  -e MAX     largest copy in bytes (default 64M)\n"
      "  -f FACTOR  each size is FACTOR times the previous one (default 2)\n"
      "  -r ROUNDS  times every process copies each size (default 5)\n"
      "  -m MS      each process copies for at least MS milliseconds a round (default 100)\n");
}

/* Parses argv into o; returns 0 to go on, 1 after the help, 2 after an error. */
static int parse(int argc, char** argv, options* o) {
  o->procs = 2;
  o->min_bytes = 8;
  o->max_bytes = (size_t)64 << 20;
  o->factor = 2;
  o->rounds = 5;
  o->min_ms = 100;
  o->exchange = 0;
  o->chunk = 0;
  o->give_up_s = 10;
  int opt;
  opterr = 0;
  while ((opt = getopt(argc, argv, "xc:g:p:b:e:f:r:m:h")) != -1) {
    char* end = NULL;
    const char* bad = NULL;
    switch (opt) {
      case 'p':
        o->procs = (int)strtol(optarg, &end, 10);
        if (*end != '\0' || o->procs < 1 || o->procs > 256) bad = "takes 1 to 256 processes";
        break;
      case 'b':
        if (bench_parse_size(optarg, &o->min_bytes) != 0 || o->min_bytes == 0) {
          bad = "takes a size like 8, 64K, 1M";
        }
        break;
      case 'e':
        if (bench_parse_size(optarg, &o->max_bytes) != 0) bad = "takes a size like 64M, 1G";
        break;
      case 'f':
        o->factor = strtod(optarg, &end);
        if (*end != '\0' || !(o->factor > 1.0)) bad = "takes a factor > 1";
        break;
      case 'r':
        o->rounds = (int)strtol(optarg, &end, 10);
        if (*end != '\0' || o->rounds < 1 || o->rounds > 1000) bad = "takes 1 to 1000 rounds";
        break;
      case 'm':
        o->min_ms = strtod(optarg, &end);
        if (*end != '\0' || !(o->min_ms >= 0)) bad = "takes milliseconds >= 0";
        break;
      case 'x':
        o->exchange = 1;
        break;
      case 'c':
        if (bench_parse_size(optarg, &o->chunk) != 0 || o->chunk < 4096) {
          bad = "takes a size of at least 4K, like 1M";
        }
        break;
      case 'g':
        o->give_up_s = strtod(optarg, &end);
        if (*end != '\0' || !(o->give_up_s > 0)) bad = "takes seconds > 0";
        break;
      case 'h':
        usage(stdout);
        return 1;
      default:
        fprintf(stderr, "memcpy_bench: error: unknown option or missing value: -%c\n", optopt);
        usage(stderr);
        return 2;
    }
    if (bad != NULL) {
      fprintf(stderr, "memcpy_bench: error: -%c %s: %s\n", opt, optarg, bad);
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "memcpy_bench: error: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (!o->exchange && o->chunk != 0) {
    fprintf(stderr, "memcpy_bench: error: -c sets the slots of -x: add -x\n");
    return 2;
  }
  if (o->exchange && o->procs < 2) {
    fprintf(stderr, "memcpy_bench: error: -x needs at least 2 processes (-p 2 or more)\n");
    return 2;
  }
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "memcpy_bench: error: -b %zu is larger than -e %zu\n", o->min_bytes,
            o->max_bytes);
    return 2;
  }
  return 0;
}

/* The sizes of the sweep, as the other benchmarks step them (bench_common.c). */
static size_t sizes_of(const options* o, size_t* out, size_t cap) {
  size_t n = 0, last = 0;
  for (double s = (double)o->min_bytes; s <= (double)o->max_bytes && n < cap; s *= o->factor) {
    size_t bytes = (size_t)s;
    if (bytes == 0 || bytes == last) continue;
    out[n++] = last = bytes;
  }
  return n;
}

static int read_all(int fd, void* buf, size_t len) {
  char* p = buf;
  while (len > 0) {
    ssize_t got = read(fd, p, len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    p += got;
    len -= (size_t)got;
  }
  return 0;
}

static int write_all(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t put = write(fd, p, len);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return -1;
    p += put;
    len -= (size_t)put;
  }
  return 0;
}

/* -x: what the processes share: per process its counters (a cache line each) and two slots
 * of `chunk` bytes; stop_at is process 0's. */
typedef struct {
  long posted; /* the last step whose pieces are in this process's slot */
  long took;   /* the last step whose pieces this process has copied out of the others' */
  char pad[64 - 2 * sizeof(long)];
} xcounters;

typedef struct {
  long* stop_at;  /* the round's last step, once process 0 has seen -m ms pass */
  xcounters* ctl; /* procs of them */
  char* slots;    /* procs x 2 slots */
  size_t chunk;
} xshared;

static size_t xshared_bytes(int procs, size_t chunk) {
  return 64 + (size_t)procs * sizeof(xcounters) + (size_t)procs * 2 * chunk;
}

static xshared xshared_at(char* base, int procs, size_t chunk) {
  xshared x = {(long*)base, (xcounters*)(base + 64), NULL, chunk};
  x.slots = base + 64 + (size_t)procs * sizeof(xcounters);
  return x;
}

/* Until *word >= at_least: spins, then yields the core to whoever can use it. A process that
 * waits -g seconds for another (which died, or was stopped) gives up: nothing is left spinning. */
static void xwait(const long* word, long at_least, const options* o, int me, int other) {
  double since = 0;
  for (int spins = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) < at_least; ++spins) {
    if (spins < 64) continue;
    sched_yield();
    if (spins % 4096 != 0) continue;
    double now = bench_now_us();
    if (since == 0) since = now;
    if (now - since > o->give_up_s * 1e6) {
      fprintf(stderr,
              "memcpy_bench: error: -x: process %d waited %g s for process %d: it died "
              "or was stopped\n",
              me, o->give_up_s, other);
      _exit(1);
    }
  }
}

/* One process's copy state: its buffers, the step it is at, and the size's pieces. */
typedef struct {
  const options* o;
  const xshared* x;
  int me;
  char* in;
  char* out;
  long step;     /* the next step, counted over every round and size */
  size_t piece;  /* bytes of one piece */
  size_t slice;  /* S / procs: where each process's piece of a step lies in in and out */
  long per_call; /* the steps of one allreduce of S */
} xstate;

/* Step i; 0 when the round ended before it (process 0's stop_at, from at step `first`). */
static int xstep(xstate* st, long first) {
  const int n = st->o->procs;
  const long i = st->step;
  const xshared* x = st->x;
  for (int m = 0; m < n; ++m) {
    if (m != st->me) xwait(&x->ctl[m].took, i - 2, st->o, st->me, m); /* my slot of i - 2 is free */
  }
  const long stop = __atomic_load_n(x->stop_at, __ATOMIC_ACQUIRE);
  if (stop >= first && i > stop) return 0;
  const size_t at = (size_t)(i % st->per_call) * st->piece;
  char* mine = x->slots + ((size_t)st->me * 2 + (size_t)(i % 2)) * x->chunk;
  for (int m = 0; m < n; ++m) {
    if (m != st->me) memcpy(mine + (size_t)m * st->piece, st->in + m * st->slice + at, st->piece);
  }
  __atomic_store_n(&x->ctl[st->me].posted, i, __ATOMIC_RELEASE);
  for (int m = 0; m < n; ++m) {
    if (m == st->me) continue;
    xwait(&x->ctl[m].posted, i, st->o, st->me, m);
    const char* theirs = x->slots + ((size_t)m * 2 + (size_t)(i % 2)) * x->chunk;
    memcpy(st->out + m * st->slice + at, theirs + (size_t)st->me * st->piece, st->piece);
  }
  __atomic_store_n(&x->ctl[st->me].took, i, __ATOMIC_RELEASE);
  st->step = i + 1;
  return 1;
}

/* One -x round of steps: the bytes this process took in per second. Process 0 ends it (at a
 * step every process reaches: see the stop rule in xstep) once -m ms passed and 4 steps ran. */
static double exchange_round(xstate* st) {
  const long first = st->step;
  const double start = bench_now_us();
  int stopping = 0;
  for (;;) {
    if (st->me == 0 && !stopping && st->step - first >= 4 &&
        bench_now_us() - start >= st->o->min_ms * 1e3) {
      __atomic_store_n(st->x->stop_at, st->step + 1, __ATOMIC_RELEASE); /* once a round */
      stopping = 1;
    }
    if (!xstep(st, first)) break;
  }
  const double secs = (bench_now_us() - start) * 1e-6;
  return (double)(st->step - first) * (double)(st->o->procs - 1) * (double)st->piece / secs;
}

/* One memcpy round: S bytes back and forth between a and b for -m ms; bytes per second. */
static double copy_round(const options* o, char* a, char* b, size_t bytes) {
  /* Look at the clock every ~1 MiB copied, so small copies are not timing the clock. */
  size_t batch = bytes >= ((size_t)1 << 20) ? 1 : ((size_t)1 << 20) / bytes;
  double start = bench_now_us(), now = start;
  size_t copies = 0;
  do {
    for (size_t i = 0; i < batch; ++i, ++copies) {
      if (copies & 1) {
        memcpy(a, b, bytes);
      } else {
        memcpy(b, a, bytes);
      }
      __asm__ __volatile__("" ::: "memory"); /* every copy happens */
    }
    now = bench_now_us();
  } while (now - start < o->min_ms * 1e3 || copies < 2);
  return (double)bytes * (double)copies / ((now - start) * 1e-6);
}

/* Sets the exchange's pieces for an allreduce of `bytes` (as the node group cuts them). */
static void xsize(xstate* st, size_t bytes) {
  const size_t n = (size_t)st->o->procs;
  st->slice = (bytes + n - 1) / n;
  st->piece = st->x->chunk / n < st->slice ? st->x->chunk / n : st->slice;
  st->per_call = (long)((st->slice + st->piece - 1) / st->piece);
}

/* One process: for each size and round, ready ("r") -> wait for go -> copy (or exchange) -> its
 * rate into rates[(size * rounds + round) * procs + index]; at the end "d" (or "x" when it
 * cannot start). Returns the exit status. */
static int child(const options* o, const xshared* x, const size_t* sizes, size_t nsizes, int index,
                 int ready_fd, int go_fd, double* rates) {
  /* A piece may run past a slice's end by less than a slot (-x). */
  size_t buf_bytes = (o->max_bytes + (x != NULL ? x->chunk : 0) + 4095) / 4096 * 4096;
  char* a = mmap(NULL, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* b = mmap(NULL, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED || b == MAP_FAILED) {
    fprintf(stderr, "memcpy_bench: error: process %d: cannot map 2 x %zu bytes: %s\n", index,
            buf_bytes, strerror(errno));
    (void)write_all(ready_fd, "x", 1); /* the parent stops */
    return 1;
  }
  memset(a, 1, buf_bytes); /* faults every page in now, not while timed */
  memset(b, 2, buf_bytes);
  xstate st = {o, x, index, a, b, 1, 0, 0, 1};
  for (size_t s = 0; s < nsizes; ++s) {
    if (x != NULL) xsize(&st, sizes[s]);
    for (int r = 0; r < o->rounds; ++r) {
      char token = 'r';
      if (write_all(ready_fd, &token, 1) != 0 || read_all(go_fd, &token, 1) != 0) return 1;
      rates[((size_t)s * (size_t)o->rounds + (size_t)r) * (size_t)o->procs + (size_t)index] =
          x != NULL ? exchange_round(&st) : copy_round(o, a, b, sizes[s]);
    }
  }
  return write_all(ready_fd, "d", 1) == 0 ? 0 : 1; /* done: the last size's rates are in */
}

/* -c's default: the L2 cache's size, from 256 KiB to 4 MiB (libddl's auto_chunk_bytes). */
static size_t default_chunk(void) {
  size_t bytes = 0;
  for (int i = 0; i < 8 && bytes == 0; ++i) {
    char path[96], type[32] = "";
    unsigned long long level = 0, v = 0;
    char unit = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE* f = fopen(path, "r");
    if (f == NULL) break;
    int ok = fscanf(f, "%llu", &level) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if ((f = fopen(path, "r")) != NULL) {
      ok = ok && fscanf(f, "%31s", type) == 1;
      fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!ok || level != 2 || strcmp(type, "Instruction") == 0 || (f = fopen(path, "r")) == NULL) {
      continue;
    }
    if (fscanf(f, "%llu%c", &v, &unit) >= 1) {
      bytes = (size_t)v * (unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1);
    }
    fclose(f);
  }
  if (bytes < ((size_t)256 << 10)) return (size_t)256 << 10;
  return bytes > ((size_t)4 << 20) ? (size_t)4 << 20 : bytes;
}

static int cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

/* Prints the row of size `bytes` from its per_size rates. */
static void print_row(size_t bytes, const double* rates, size_t per_size, double* sorted) {
  memcpy(sorted, rates, per_size * sizeof(double));
  qsort(sorted, per_size, sizeof(double), cmp_double);
  double median =
      per_size % 2 ? sorted[per_size / 2] : (sorted[per_size / 2 - 1] + sorted[per_size / 2]) / 2;
  printf("  %10zu %12.3f %12.4f %12.4f %12.4f\n", bytes, (double)bytes / median * 1e6, median / 1e9,
         sorted[0] / 1e9, sorted[per_size - 1] / 1e9);
  fflush(stdout);
}

static void print_header(const options* o, size_t chunk) {
  if (o->exchange) {
    printf(
        "# memcpy_bench -x: %d processes handing each other pieces through shared slots of %zu "
        "bytes\n",
        o->procs, chunk);
    printf(
        "# rounds %d, at least %.0f ms each; rate = bytes one process takes in per second "
        "that another wrote\n",
        o->rounds, o->min_ms);
    printf("# (median over processes and rounds, GB/s = 1e9 B/s); time = S bytes at that rate\n");
  } else {
    printf("# memcpy_bench: %d processes copying at once, each between its own two buffers\n",
           o->procs);
    printf("# rounds %d, at least %.0f ms each; rate = bytes one process copies per second\n",
           o->rounds, o->min_ms);
    printf("# (median over processes and rounds, GB/s = 1e9 B/s); time = one copy at that rate\n");
  }
  printf("#\n# %10s %12s %12s %12s %12s\n", "size(B)", "time(us)", "rate(GB/s)", "min(GB/s)",
         "max(GB/s)");
  fflush(stdout);
}

/* -x's shared slots and counters, mapped before the processes start (x->chunk 0 without -x). */
static int map_exchange(const options* o, xshared* x) {
  xshared none = {NULL, NULL, NULL, 0};
  *x = none;
  if (!o->exchange) return 0;
  size_t chunk = o->chunk != 0 ? o->chunk : default_chunk();
  size_t bytes = xshared_bytes(o->procs, chunk);
  char* base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    fprintf(stderr, "memcpy_bench: error: -x: cannot map %zu bytes of slots: %s\n", bytes,
            strerror(errno));
    return 1;
  }
  memset(base, 0, bytes); /* faulted in now; counters at 0 */
  *x = xshared_at(base, o->procs, chunk);
  return 0;
}

int main(int argc, char** argv) {
  options o;
  int status = parse(argc, argv, &o);
  if (status != 0) return status == 1 ? 0 : 2;

  size_t sizes[256];
  size_t nsizes = sizes_of(&o, sizes, sizeof(sizes) / sizeof(sizes[0]));
  size_t per_size = (size_t)o.rounds * (size_t)o.procs;
  size_t table_bytes = nsizes * per_size * sizeof(double);
  double* rates = mmap(NULL, table_bytes > 0 ? table_bytes : 1, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  /* One pipe on which every process says it is ready, one per process for the parent's go (a
   * shared one would let a fast process take a slow one's go). */
  int ready[2];
  int* go = calloc((size_t)o.procs * 2, sizeof(int));
  pid_t* pids = calloc((size_t)o.procs, sizeof(pid_t));
  char* tokens = malloc((size_t)o.procs);
  double* sorted = malloc(per_size * sizeof(double) + 1);
  if (rates == MAP_FAILED || go == NULL || pids == NULL || tokens == NULL || sorted == NULL ||
      pipe(ready) != 0) {
    fprintf(stderr, "memcpy_bench: error: cannot set up: %s\n", strerror(errno));
    return 1;
  }
  xshared x;
  if (map_exchange(&o, &x) != 0) return 1;
  int started = 0, failed = 0;
  for (; started < o.procs; ++started) {
    pid_t pid = -1;
    if (pipe(go + 2 * started) != 0 || (pid = fork()) < 0) {
      fprintf(stderr, "memcpy_bench: error: cannot start process %d: %s\n", started,
              strerror(errno));
      failed = 1;
      break;
    }
    if (pid == 0) {
      close(ready[0]);
      for (int i = 0; i <= started; ++i)
        close(go[2 * i + 1]);
      _exit(child(&o, o.exchange ? &x : NULL, sizes, nsizes, started, ready[1], go[2 * started],
                  rates));
    }
    close(go[2 * started]);
    pids[started] = pid;
  }
  close(ready[1]);

  if (!failed) print_header(&o, x.chunk);
  /* Every process says it is ready before each round and once more at its end; a size's rates
   * are all in when every process is ready for the next size (or has ended). */
  for (size_t s = 0; s <= nsizes && !failed; ++s) {
    for (int r = 0; r < (s < nsizes ? o.rounds : 1) && !failed; ++r) {
      if (read_all(ready[0], tokens, (size_t)o.procs) != 0 ||
          memchr(tokens, 'x', (size_t)o.procs) != NULL) {
        fprintf(stderr, "memcpy_bench: error: a copying process ended early\n");
        failed = 1;
        break;
      }
      if (r == 0 && s > 0) print_row(sizes[s - 1], rates + (s - 1) * per_size, per_size, sorted);
      for (int i = 0; i < o.procs && s < nsizes; ++i) {
        if (write_all(go[2 * i + 1], "g", 1) != 0) failed = 1;
      }
    }
  }
  for (int i = 0; i < started; ++i)
    close(go[2 * i + 1]);
  close(ready[0]);
  for (int i = 0; i < started; ++i) {
    int wstatus = 0;
    if (waitpid(pids[i], &wstatus, 0) < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      failed = 1;
    }
  }
  free(sorted);
  free(tokens);
  free(pids);
  free(go);
  return failed ? 1 : 0;
}
