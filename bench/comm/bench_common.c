/* The benchmarks' shared driver: options, the size sweep, the value pattern and its check, the
 * table. How it works: see bench_common.h. */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* const kTypeNames[BENCH_TYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"};
static const size_t kTypeSizes[BENCH_TYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};
static const char* const kOpNames[BENCH_OP_COUNT] = {"sum", "avg", "min", "max", "prod"};
static const char* const kCollNames[BENCH_COLL_COUNT] = {"allreduce", "allgather", "reducescatter",
                                                         "bcast"};

size_t bench_type_size(bench_type t) {
  return kTypeSizes[t];
}
const char* bench_type_name(bench_type t) {
  return kTypeNames[t];
}
const char* bench_op_name(bench_op op) {
  return kOpNames[op];
}
const char* bench_coll_name(bench_coll c) {
  return kCollNames[c];
}

double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int bench_parse_size(const char* text, size_t* bytes) {
  char* end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno != 0 || end == text || text[0] == '-') return -1;
  unsigned long long scale = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      scale = 1ull << 10;
      break;
    case 'm':
    case 'M':
      scale = 1ull << 20;
      break;
    case 'g':
    case 'G':
      scale = 1ull << 30;
      break;
    default:
      return -1;
  }
  if (*end != '\0' && end[1] != '\0') return -1;
  if (value > SIZE_MAX / scale) return -1;
  *bytes = (size_t)(value * scale);
  return 0;
}

/* Index of `name` in `names`, or -1. */
static int find_name(const char* name, const char* const* names, int count) {
  for (int i = 0; i < count; ++i) {
    if (strcmp(name, names[i]) == 0) return i;
  }
  return -1;
}

/* Parses a whole decimal int in [lo, hi]; returns 0 or -1. */
static int parse_int(const char* text, int lo, int hi, int* value) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return -1;
  *value = (int)v;
  return 0;
}

static void print_usage(FILE* f, const char* prog, const bench_extra_options* extra) {
  fprintf(f,
          "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-t TYPE] [-o OP] [-w WARMUP] [-n ITERS]\n"
          "       [-c 0|1] [-a COLL]%s\n"
          "  -b MIN     smallest message in bytes; K, M, G multiply by 1024^k (default 8)\n"
          "  -e MAX     largest message in bytes (default 256M)\n"
          "  -f FACTOR  each message is FACTOR times the previous one (default 2)\n"
          "  -t TYPE    float32 float64 float16 bfloat16 int32 int64 uint8 (default float32)\n"
          "  -o OP      sum avg min max prod (default sum)\n"
          "  -w WARMUP  untimed collectives per size (default 5)\n"
          "  -n ITERS   timed collectives per size (default 20)\n"
          "  -c 0|1     check the results after the timed ones (default 1)\n"
          "  -a COLL    allreduce allgather reducescatter bcast (default allreduce)\n"
          "%s",
          prog, extra != NULL ? " [OPTIONS]" : "", extra != NULL ? extra->help : "");
}

int bench_parse_options(int argc, char** argv, const char* prog, bench_options* o,
                        const bench_extra_options* extra) {
  memset(o, 0, sizeof(*o));
  o->min_bytes = 8;
  o->max_bytes = (size_t)256 << 20;
  o->factor = 2;
  o->type = BENCH_FLOAT32;
  o->op = BENCH_SUM;
  o->warmup = 5;
  o->iters = 20;
  o->check = 1;
  o->coll = BENCH_ALLREDUCE;
  o->init_what = "init";

  char optstring[64] = "b:e:f:t:o:w:n:c:a:h";
  if (extra != NULL) strncat(optstring, extra->opts, sizeof(optstring) - strlen(optstring) - 1);
  opterr = 0;
  int opt;
  while ((opt = getopt(argc, argv, optstring)) != -1) {
    const char* bad = NULL;
    int index;
    switch (opt) {
      case 'b':
        if (bench_parse_size(optarg, &o->min_bytes) != 0) bad = "-b takes a size like 8, 64K, 1M";
        break;
      case 'e':
        if (bench_parse_size(optarg, &o->max_bytes) != 0) bad = "-e takes a size like 256M, 1G";
        break;
      case 'f': {
        char* end = NULL;
        o->factor = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o->factor > 1.0)) bad = "-f takes a factor > 1";
        break;
      }
      case 't':
        index = find_name(optarg, kTypeNames, BENCH_TYPE_COUNT);
        if (index < 0) bad = "-t takes float32 float64 float16 bfloat16 int32 int64 uint8";
        o->type = (bench_type)index;
        break;
      case 'o':
        index = find_name(optarg, kOpNames, BENCH_OP_COUNT);
        if (index < 0) bad = "-o takes sum avg min max prod";
        o->op = (bench_op)index;
        break;
      case 'w':
        if (parse_int(optarg, 0, 1000000, &o->warmup) != 0) bad = "-w takes a count >= 0";
        break;
      case 'n':
        if (parse_int(optarg, 1, 1000000, &o->iters) != 0) bad = "-n takes a count >= 1";
        break;
      case 'c':
        if (parse_int(optarg, 0, 1, &o->check) != 0) bad = "-c takes 0 or 1";
        break;
      case 'a':
        index = find_name(optarg, kCollNames, BENCH_COLL_COUNT);
        if (index < 0) bad = "-a takes allreduce allgather reducescatter bcast";
        o->coll = (bench_coll)index;
        break;
      case 'h':
        print_usage(stdout, prog, extra);
        return 1;
      case '?':
        fprintf(stderr, "%s: error: unknown option or missing value: -%c\n", prog, optopt);
        print_usage(stderr, prog, extra);
        return 2;
      default:
        if (extra == NULL || extra->take(extra->ctx, opt, optarg) != 0) {
          print_usage(stderr, prog, extra);
          return 2;
        }
        break;
    }
    if (bad != NULL) {
      fprintf(stderr, "%s: error: -%c %s: %s\n", prog, opt, optarg, bad);
      print_usage(stderr, prog, extra);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: error: unexpected argument '%s'\n", prog, argv[optind]);
    print_usage(stderr, prog, extra);
    return 2;
  }
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "%s: error: -b %zu is larger than -e %zu\n", prog, o->min_bytes, o->max_bytes);
    return 2;
  }
  return 0;
}

/* float16 and bfloat16 from and to float, rounding to nearest even (libddl's conversions,
 * comm/collectives/reduce.cc). */
static uint32_t bits_of(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

static float float_of(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t float_to_half(float f) {
  uint32_t x = bits_of(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN: quiet */
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
  /* Subnormal or zero: adding 0.5f lines the half's bits up with the float's low bits, and the
   * float addition rounds them to nearest even. */
  if (x < 0x38800000u) return (uint16_t)(sign | (bits_of(float_of(x) + 0.5f) - 0x3f000000u));
  x += ((uint32_t)(15 - 127) << 23) + 0xfffu + ((x >> 13) & 1u);
  return (uint16_t)(sign | (x >> 13));
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (mant << 13));
  return float_of(sign | bits_of((float)mant * 0x1p-24f)); /* zero or subnormal: exact */
}

static uint16_t float_to_bf16(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_float(uint16_t b) {
  return float_of((uint32_t)b << 16);
}

/* Element i of buf, a t, set to v (integers wrap as C converts them) or read back. */
static void store(void* buf, bench_type t, size_t i, int64_t v) {
#define STORE(type, c_type) \
  if (t == type) ((c_type*)buf)[i] = (c_type)v;
  BENCH_C_TYPES(STORE)
#undef STORE
  if (t == BENCH_FLOAT16) ((uint16_t*)buf)[i] = float_to_half((float)v);
  if (t == BENCH_BFLOAT16) ((uint16_t*)buf)[i] = float_to_bf16((float)v);
}

static double load(const void* buf, bench_type t, size_t i) {
#define LOAD(type, c_type) \
  if (t == type) return (double)((const c_type*)buf)[i];
  BENCH_C_TYPES(LOAD)
#undef LOAD
  if (t == BENCH_FLOAT16) return half_to_float(((const uint16_t*)buf)[i]);
  if (t == BENCH_BFLOAT16) return bf16_to_float(((const uint16_t*)buf)[i]);
  return 0;
}

/* The value pattern: element i of rank r among n for op (see bench_common.h). */
static int64_t pattern(bench_op op, int r, int n, size_t i) {
  if (op == BENCH_PROD) return 1 + (int64_t)((i + (size_t)r) % 2);
  return 2 * (int64_t)((i + (size_t)r) % (size_t)n) + (int64_t)(i % 3);
}

/* op over every rank's element i, folded the obvious way, as an exact integer. */
static int64_t reference(bench_op op, int n, size_t i) {
  int64_t acc = pattern(op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    int64_t v = pattern(op, r, n, i);
    switch (op) {
      case BENCH_SUM:
      case BENCH_AVG:
        acc += v;
        break;
      case BENCH_MIN:
        acc = v < acc ? v : acc;
        break;
      case BENCH_MAX:
        acc = v > acc ? v : acc;
        break;
      case BENCH_PROD:
        acc *= v;
        break;
      case BENCH_OP_COUNT:
        break;
    }
  }
  return op == BENCH_AVG ? acc / n : acc;
}

/* Whether got (element i of buf) is the exact value `want` as a t holds it. float16 and
 * bfloat16 results of many ranks may round on the way, so they get n roundings of slack. */
static int is_wrong(const void* buf, bench_type t, size_t i, int64_t want, int n) {
  uint64_t scratch = 0;
  store(&scratch, t, 0, want);
  double expect = load(&scratch, t, 0);
  double got = load(buf, t, i);
  if (got == expect) return 0;
  double eps = t == BENCH_FLOAT16 ? 0x1p-10 : t == BENCH_BFLOAT16 ? 0x1p-7 : 0;
  return !(fabs(got - expect) <= fabs(expect) * eps * n);
}

static void fill(void* buf, bench_type t, size_t count, bench_op op, int r, int n) {
  for (size_t i = 0; i < count; ++i)
    store(buf, t, i, pattern(op, r, n, i));
}

/* Fills the buffers of coll for `count` (bench_backend.run's meaning) with this rank's pattern
 * and clears the result. */
static void prepare(const bench_options* o, const bench_backend* b, void* send, void* recv,
                    size_t count) {
  int r = b->rank, n = b->nranks;
  size_t elem = bench_type_size(o->type);
  switch (o->coll) {
    case BENCH_ALLREDUCE:
      fill(send, o->type, count, o->op, r, n);
      if (b->in_place) {
        memcpy(recv, send, count * elem);
      } else {
        memset(recv, 0, count * elem);
      }
      break;
    case BENCH_ALLGATHER:
      fill(send, o->type, count, BENCH_SUM, r, n);
      memset(recv, 0, count * elem * (size_t)n);
      break;
    case BENCH_REDUCESCATTER:
      fill(send, o->type, count * (size_t)n, o->op, r, n);
      memset(recv, 0, count * elem);
      break;
    case BENCH_BCAST:
      if (r == 0) {
        fill(send, o->type, count, BENCH_SUM, 0, n);
      } else {
        memset(send, 0, count * elem);
      }
      break;
    case BENCH_COLL_COUNT:
      break;
  }
}

/* Counts this rank's wrong elements after one collective on prepare()'s buffers. */
static uint64_t count_wrong(const bench_options* o, const bench_backend* b, const void* send,
                            const void* recv, size_t count) {
  int r = b->rank, n = b->nranks;
  uint64_t wrong = 0;
  switch (o->coll) {
    case BENCH_ALLREDUCE:
      for (size_t i = 0; i < count; ++i)
        wrong += is_wrong(recv, o->type, i, reference(o->op, n, i), n);
      break;
    case BENCH_ALLGATHER:
      for (int k = 0; k < n; ++k) {
        size_t base = (size_t)k * count;
        for (size_t i = 0; i < count; ++i) {
          wrong += is_wrong(recv, o->type, base + i, pattern(BENCH_SUM, k, n, i), n);
        }
      }
      break;
    case BENCH_REDUCESCATTER: {
      size_t base = (size_t)r * count;
      for (size_t i = 0; i < count; ++i) {
        wrong += is_wrong(recv, o->type, i, reference(o->op, n, base + i), n);
      }
      break;
    }
    case BENCH_BCAST:
      for (size_t i = 0; i < count; ++i) {
        wrong += is_wrong(send, o->type, i, pattern(BENCH_SUM, 0, n, i), n);
      }
      break;
    case BENCH_COLL_COUNT:
      break;
  }
  return wrong;
}

/* The factor that turns algbw into busbw for coll on n ranks (nccl-tests' PERFORMANCE.md). */
static double bus_factor(bench_coll coll, int n) {
  switch (coll) {
    case BENCH_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case BENCH_ALLGATHER:
    case BENCH_REDUCESCATTER:
      return (double)(n - 1) / n;
    case BENCH_BCAST:
    case BENCH_COLL_COUNT:
      break;
  }
  return 1.0;
}

/* The allreduce of one float64 over every rank (op max or sum), through the backend. */
static int reduce_double(const bench_backend* b, double* value, bench_op op, char* err,
                         size_t err_len) {
  double in = *value;
  return b->run(b->ctx, BENCH_ALLREDUCE, &in, value, 1, BENCH_FLOAT64, op, err, err_len);
}

/* Rank 0 says why the backend cannot run o; every rank returns the same. */
static int check_supported(const bench_options* o, const bench_backend* b) {
  const char* what = NULL;
  const char* name = NULL;
  if (!(b->colls & (1u << o->coll))) {
    what = "collective";
    name = bench_coll_name(o->coll);
  } else if (!(b->types & (1u << o->type))) {
    what = "type";
    name = bench_type_name(o->type);
  } else if ((o->coll == BENCH_ALLREDUCE || o->coll == BENCH_REDUCESCATTER) &&
             !(b->ops & (1u << o->op))) {
    what = "op";
    name = bench_op_name(o->op);
  }
  if (what == NULL) return 0;
  if (b->rank == 0) {
    fprintf(stderr, "%s-bench: error: %s does not support the %s '%s'; supported:", b->name,
            b->name, what, name);
    for (int i = 0; i < 8; ++i) {
      unsigned mask = what[0] == 'c' ? b->colls : what[0] == 't' ? b->types : b->ops;
      if (!(mask & (1u << i))) continue;
      fprintf(stderr, " %s",
              what[0] == 'c'   ? bench_coll_name((bench_coll)i)
              : what[0] == 't' ? bench_type_name((bench_type)i)
                               : bench_op_name((bench_op)i));
    }
    fprintf(stderr, "\n");
  }
  return 2;
}

/* The buffers of the sweep: host ones, which prepare() fills and count_wrong() reads, and
 * those the collectives run on: the same, or the bench_memory's (GPU memory). */
typedef struct {
  void* send;
  void* recv;
  void* run_send;
  void* run_recv;
} buffers;

static void buffers_free(const bench_backend* b, buffers* x) {
  if (b->memory != NULL && x->run_send != x->send) {
    if (x->run_send != NULL) b->memory->release(x->run_send);
    if (x->run_recv != NULL) b->memory->release(x->run_recv);
  }
  if (b->host_free != NULL) {
    if (x->send != NULL) b->host_free(x->send);
    if (x->recv != NULL) b->host_free(x->recv);
    return;
  }
  free(x->send);
  free(x->recv);
}

static int buffers_alloc(const bench_backend* b, size_t bytes, buffers* x, char* err,
                         size_t err_len) {
  memset(x, 0, sizeof(*x));
  x->send = b->host_alloc != NULL ? b->host_alloc(bytes) : aligned_alloc(4096, bytes);
  x->recv = b->host_alloc != NULL ? b->host_alloc(bytes) : aligned_alloc(4096, bytes);
  if (x->send == NULL || x->recv == NULL) {
    snprintf(err, err_len, "cannot allocate 2 x %zu bytes (-e): %s", bytes, strerror(errno));
    return 1;
  }
  memset(x->send, 0, bytes);
  memset(x->recv, 0, bytes);
  if (b->memory == NULL) {
    x->run_send = x->send;
    x->run_recv = x->recv;
    return 0;
  }
  if ((x->run_send = b->memory->alloc(bytes, err, err_len)) == NULL) return 1;
  if ((x->run_recv = b->memory->alloc(bytes, err, err_len)) == NULL) return 1;
  return 0;
}

/* Copies the first `bytes` of both host buffers into the memory's (to_memory) or back. */
static int buffers_sync(const bench_backend* b, buffers* x, size_t bytes, int to_memory, char* err,
                        size_t err_len) {
  if (b->memory == NULL) return 0;
  if (to_memory) {
    return b->memory->copy(x->run_send, x->send, bytes, 1, err, err_len) ||
           b->memory->copy(x->run_recv, x->recv, bytes, 1, err, err_len);
  }
  return b->memory->copy(x->send, x->run_send, bytes, 0, err, err_len) ||
         b->memory->copy(x->recv, x->run_recv, bytes, 0, err, err_len);
}

int bench_run(const bench_options* o, const bench_backend* b, FILE* out) {
  int status = check_supported(o, b);
  if (status != 0) return status;
  int n = b->nranks;
  size_t elem = bench_type_size(o->type);
  char err[512] = "";

  /* send and recv hold the largest message whatever the collective (see run's contract). */
  size_t buf_bytes = (o->max_bytes + 4095) / 4096 * 4096;
  buffers x;
  if (buffers_alloc(b, buf_bytes, &x, err, sizeof(err)) != 0) goto failed;
  void* send = x.run_send;
  void* recv = x.run_recv;
  const void* from = b->in_place && o->coll == BENCH_ALLREDUCE ? recv : send;

  double init_ms = o->init_ms;
  if (reduce_double(b, &init_ms, BENCH_MAX, err, sizeof(err)) != 0) goto failed;
  if (b->rank == 0) {
    fprintf(out, "# %s-bench: %s, %d ranks, %s %s, warmup %d, iters %d, check %s\n", b->name,
            bench_coll_name(o->coll), n, bench_type_name(o->type), bench_op_name(o->op), o->warmup,
            o->iters, o->check ? "on" : "off");
    fprintf(out, "# init: %.1f ms (%s, max over ranks)\n", init_ms, o->init_what);
    if (b->memory != NULL) {
      fprintf(out, "# buffers: %s device memory (filled and checked through host copies)\n",
              b->memory->name);
    }
    if (b->in_place && o->coll == BENCH_ALLREDUCE) {
      fprintf(out, "# allreduce in place on recv (recv starts with the input)\n");
    }
    fprintf(out, "# time: mean of the timed collectives, max over ranks; busbw = algbw * %.4f\n",
            bus_factor(o->coll, n));
    fprintf(out, "#\n# %10s %12s %9s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
            "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    fflush(out);
  }

  double busbw_sum = 0;
  int rows = 0;
  uint64_t wrong_total = 0;
  size_t last_bytes = 0;
  for (double s = (double)o->min_bytes; s <= (double)o->max_bytes; s *= o->factor) {
    /* count in run's meaning; total = the elements of the whole buffer (the size column). */
    size_t bytes = (size_t)s;
    size_t per_chunk = o->coll == BENCH_ALLGATHER || o->coll == BENCH_REDUCESCATTER ? (size_t)n : 1;
    size_t count = bytes / (elem * per_chunk);
    size_t total = count * per_chunk;
    bytes = total * elem;
    if (count == 0 || bytes == last_bytes) continue;
    last_bytes = bytes;
    size_t span = count * elem * per_chunk; /* the bytes of the larger buffer */

    prepare(o, b, x.send, x.recv, count);
    if (buffers_sync(b, &x, span, 1, err, sizeof(err)) != 0) goto failed;
    for (int w = 0; w < o->warmup; ++w) {
      if (b->run(b->ctx, o->coll, from, recv, count, o->type, o->op, err, sizeof(err)) != 0) {
        goto failed;
      }
    }
    if (b->barrier(b->ctx, err, sizeof(err)) != 0) goto failed;
    double start = bench_now_us();
    for (int it = 0; it < o->iters; ++it) {
      if (b->run(b->ctx, o->coll, from, recv, count, o->type, o->op, err, sizeof(err)) != 0) {
        goto failed;
      }
    }
    double time_us = (bench_now_us() - start) / o->iters;
    if (reduce_double(b, &time_us, BENCH_MAX, err, sizeof(err)) != 0) goto failed;

    double wrong = 0;
    if (o->check) {
      prepare(o, b, x.send, x.recv, count);
      if (buffers_sync(b, &x, span, 1, err, sizeof(err)) != 0) goto failed;
      if (b->run(b->ctx, o->coll, from, recv, count, o->type, o->op, err, sizeof(err)) != 0) {
        goto failed;
      }
      if (buffers_sync(b, &x, span, 0, err, sizeof(err)) != 0) goto failed;
      wrong = (double)count_wrong(o, b, x.send, x.recv, count);
      if (reduce_double(b, &wrong, BENCH_SUM, err, sizeof(err)) != 0) goto failed;
    }
    wrong_total += (uint64_t)wrong;

    double algbw = (double)bytes / time_us / 1e3; /* bytes/us = MB/s; GB/s = 1e9 B/s */
    double busbw = algbw * bus_factor(o->coll, n);
    busbw_sum += busbw;
    ++rows;
    if (b->rank == 0) {
      char wrong_text[24] = "N/A";
      if (o->check) snprintf(wrong_text, sizeof(wrong_text), "%llu", (unsigned long long)wrong);
      fprintf(out, "  %10zu %12zu %9s %6s %12.2f %12.4f %12.4f %8s\n", bytes, total,
              bench_type_name(o->type),
              o->coll == BENCH_ALLREDUCE || o->coll == BENCH_REDUCESCATTER ? bench_op_name(o->op)
                                                                           : "none",
              time_us, algbw, busbw, wrong_text);
      fflush(out);
    }
  }
  if (b->rank == 0) {
    fprintf(out, "# avg busbw: %.4f GB/s\n", rows > 0 ? busbw_sum / rows : 0.0);
    fprintf(out, "# wrong elements: %llu%s\n", (unsigned long long)wrong_total,
            o->check ? "" : " (not checked)");
    fflush(out);
  }
  buffers_free(b, &x);
  return wrong_total > 0 ? 1 : 0;

failed:
  fprintf(stderr, "%s-bench: error: rank %d: %s\n", b->name, b->rank, err);
  buffers_free(b, &x);
  return 3;
}
