/* gloo_allreduce_bench: the ddl-bench table for Gloo's ring allreduce over its TCP transport,
 * the baseline PyTorch's gloo backend gives (bench/allreduce_compare.sh compares).
 *
 *   ddlrun -H localhost:4 build/bench/comm/gloo_allreduce_bench -b 8 -e 256M -i lo
 *   mpirun -np 4 build/bench/comm/gloo_allreduce_bench -s /shared/dir
 *
 * How it works: the rank and size come from the launcher (RANK and WORLD_SIZE from ddlrun or
 * torchrun, else OMPI_COMM_WORLD_RANK and _SIZE from Open MPI, else PMI_RANK and PMI_SIZE).
 * Each rank makes a TCP device bound to its host name's address (-H to name another, -i to
 * name an interface instead), and the ranks meet through a gloo::rendezvous::FileStore in a
 * directory every rank sees (-s; by default /tmp/gloo-bench-JOB, JOB being the launcher's job
 * id: right on one host, where /tmp is shared), under a prefix store named after the job.
 * connectFullMesh() is timed (the "init" line). Then bench_run() (bench_common.h) with a backend
 * whose run is gloo::allreduce with Algorithm::RING (out of place: input -> output), or
 * gloo::allgather, or gloo::broadcast from rank 0. Gloo has no bfloat16, avg or reduce-scatter
 * in this API; asking for them fails before the sweep. Gloo reports errors by throwing; run
 * turns them into the message bench_run prints.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench_common.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/types.h"

namespace {

/// How long one collective (and the rendezvous) may take before Gloo gives up.
constexpr std::chrono::seconds kTimeout{300};

/// The options only this benchmark takes (-s, -H, -i).
struct GlooOptions {
  std::string store_dir;
  std::string hostname;
  std::string iface;
};

int take_option(void* ctx, int opt, const char* arg) {
  auto* o = static_cast<GlooOptions*>(ctx);
  switch (opt) {
    case 's':
      o->store_dir = arg;
      return 0;
    case 'H':
      o->hostname = arg;
      return 0;
    case 'i':
      o->iface = arg;
      return 0;
  }
  std::fprintf(stderr, "gloo_allreduce_bench: error: unknown option -%c\n", opt);
  return 1;
}

/// The first of `names` that is set in the environment, or nullptr.
const char* first_env(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  }
  return nullptr;
}

/// The reduction `op` on T, in gloo's untyped form.
template <typename T>
gloo::AllreduceOptions::Func reduce_function(bench_op op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case BENCH_MIN:
      return static_cast<Fn>(&gloo::min<T>);
    case BENCH_MAX:
      return static_cast<Fn>(&gloo::max<T>);
    case BENCH_PROD:
      return static_cast<Fn>(&gloo::product<T>);
    default:
      return static_cast<Fn>(&gloo::sum<T>);
  }
}

/// Runs one collective on elements of type T.
template <typename T>
void run_typed(const std::shared_ptr<gloo::Context>& context, bench_coll coll, const void* send,
               void* recv, size_t count, bench_op op) {
  T* in = static_cast<T*>(const_cast<void*>(send));
  T* out = static_cast<T*>(recv);
  switch (coll) {
    case BENCH_ALLREDUCE: {
      gloo::AllreduceOptions opts(context);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setInput(in, count);
      opts.setOutput(out, count);
      opts.setReduceFunction(reduce_function<T>(op));
      opts.setTimeout(kTimeout);
      gloo::allreduce(opts);
      return;
    }
    case BENCH_ALLGATHER: {
      gloo::AllgatherOptions opts(context);
      opts.setInput(in, count);
      opts.setOutput(out, count * static_cast<size_t>(context->size));
      opts.setTimeout(kTimeout);
      gloo::allgather(opts);
      return;
    }
    case BENCH_BCAST: {
      gloo::BroadcastOptions opts(context);
      opts.setOutput(in, count);
      opts.setRoot(0);
      opts.setTimeout(kTimeout);
      gloo::broadcast(opts);
      return;
    }
    default:
      throw std::runtime_error("collective not supported by the gloo backend");
  }
}

int gloo_run(void* ctx, bench_coll coll, const void* send, void* recv, size_t count,
             bench_type type, bench_op op, char* err, size_t err_len) {
  const auto& context = *static_cast<std::shared_ptr<gloo::Context>*>(ctx);
  try {
    switch (type) {
#define RUN(type_enum, c_type)                               \
  case type_enum:                                            \
    run_typed<c_type>(context, coll, send, recv, count, op); \
    break;
      BENCH_C_TYPES(RUN)
#undef RUN
      case BENCH_FLOAT16:
        run_typed<gloo::float16>(context, coll, send, recv, count, op);
        break;
      default:
        throw std::runtime_error("type not supported by the gloo backend");
    }
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "gloo %s: %s", bench_coll_name(coll), e.what());
    return 1;
  }
  return 0;
}

int gloo_barrier(void* ctx, char* err, size_t err_len) {
  const auto& context = *static_cast<std::shared_ptr<gloo::Context>*>(ctx);
  try {
    gloo::BarrierOptions opts(context);
    opts.setTimeout(kTimeout);
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "gloo barrier: %s", e.what());
    return 1;
  }
  return 0;
}

/// Deletes the rendezvous files of a store directory this program made, then the directory.
void remove_store_dir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        unlink((dir + "/" + e->d_name).c_str());
      }
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  GlooOptions gloo_options;
  bench_extra_options extra = {
      "s:H:i:", take_option, &gloo_options,
      "  -s DIR     rendezvous directory every rank sees (default /tmp/gloo-bench-JOB)\n"
      "  -H NAME    host name or address to listen on (default this host's name)\n"
      "  -i IFACE   network interface to listen on instead (as lo, eth0)\n"};
  bench_options o;
  int status = bench_parse_options(argc, argv, "gloo_allreduce_bench", &o, &extra);
  if (status != 0) return status == 1 ? 0 : 2;

  const char* rank_text = first_env({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
  const char* size_text = first_env({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  if (rank_text == nullptr || size_text == nullptr) {
    std::fprintf(stderr,
                 "gloo_allreduce_bench: error: no rank in the environment (RANK and WORLD_SIZE, "
                 "OMPI_COMM_WORLD_RANK and _SIZE, or PMI_RANK and PMI_SIZE); start it with "
                 "ddlrun or mpirun\n");
    return 2;
  }
  int rank = std::atoi(rank_text);
  int size = std::atoi(size_text);
  if (size < 1 || rank < 0 || rank >= size) {
    std::fprintf(stderr, "gloo_allreduce_bench: error: rank %s of %s is out of range\n", rank_text,
                 size_text);
    return 2;
  }
  const char* job = first_env({"DDL_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"});
  std::string prefix = std::string("gloo-bench-") + (job != nullptr ? job : "nojob");
  bool own_store = gloo_options.store_dir.empty();
  if (own_store) gloo_options.store_dir = "/tmp/" + prefix;
  mkdir(gloo_options.store_dir.c_str(), 0700);  // EEXIST: another rank (or the user) made it

  gloo::transport::tcp::attr attr;
  if (!gloo_options.iface.empty()) {
    attr.iface = gloo_options.iface;
  } else if (!gloo_options.hostname.empty()) {
    attr.hostname = gloo_options.hostname;
  } else {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    attr.hostname = host;
  }

  std::shared_ptr<gloo::Context> context;
  try {
    double start = bench_now_us();
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(gloo_options.store_dir);
    gloo::rendezvous::PrefixStore store(prefix, file_store);
    auto rendezvous = std::make_shared<gloo::rendezvous::Context>(rank, size);
    rendezvous->setTimeout(kTimeout);
    rendezvous->connectFullMesh(store, device);
    context = rendezvous;
    o.init_ms = (bench_now_us() - start) / 1e3;
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "gloo_allreduce_bench: error: rank %d: rendezvous in %s failed: %s (every rank "
                 "must see the directory: pass -s DIR on a shared file system)\n",
                 rank, gloo_options.store_dir.c_str(), e.what());
    return 1;
  }
  o.init_what = "tcp device and connectFullMesh";

  bench_backend b = {};
  b.ctx = &context;
  b.rank = rank;
  b.nranks = size;
  b.name = "gloo";
  b.run = gloo_run;
  b.barrier = gloo_barrier;
  b.types = 1u << BENCH_FLOAT32 | 1u << BENCH_FLOAT64 | 1u << BENCH_FLOAT16 | 1u << BENCH_INT32 |
            1u << BENCH_INT64 | 1u << BENCH_UINT8;
  b.ops = 1u << BENCH_SUM | 1u << BENCH_MIN | 1u << BENCH_MAX | 1u << BENCH_PROD;
  b.colls = 1u << BENCH_ALLREDUCE | 1u << BENCH_ALLGATHER | 1u << BENCH_BCAST;
  status = bench_run(&o, &b, stdout);
  if (status != 3) {
    char err[256];
    if (gloo_barrier(&context, err, sizeof(err)) == 0 && rank == 0 && own_store) {
      remove_store_dir(gloo_options.store_dir);
    }
  }
  return status;
}
