// Writes and reads large topology files and prints wall time, file size and peak RSS.
//
// Usage: topology_bench [--generic] [DIR]
//   DIR        where to write the files (default: a new directory under $TMPDIR or /tmp)
//   --generic  also time the yaml-cpp reader on the same files (slow)
//
// How it works: each case (Summit, 4,608 hosts x 6 GPUs; and 16,384 hosts x 8 GPUs) runs its
// steps in child processes forked from a parent that holds no topology, so the peak RSS a
// reading child reports is what one rank pays to read the file at start, not what the writer
// built.

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "comm/topology.h"

namespace {

using ddl::comm::CpuSet;
using ddl::comm::Topology;

struct Case {
  const char* name;
  int hosts;
  int gpus_per_host;
  const char* mode;
};

std::string ipv4(int net, int host) {
  return std::to_string(net) + "." + std::to_string((host >> 16) & 255) + "." +
         std::to_string((host >> 8) & 255) + "." + std::to_string(host & 255);
}

// A plausible job: two sockets of 22 cores x 4 hardware threads, half the GPUs on each socket,
// each GPU with its share of cores, two InfiniBand NICs (one per socket).
Topology build(const Case& c) {
  constexpr int kPusPerSocket = 88;
  const int gpus_per_socket = (c.gpus_per_host + 1) / 2;
  const int pus_per_gpu = kPusPerSocket / gpus_per_socket / 4 * 4;
  Topology t;
  t.job_id = std::string("bench-") + c.name;
  t.mode = ddl::comm::parse_mode(c.mode);
  t.hosts.reserve(static_cast<size_t>(c.hosts));
  t.ranks.reserve(static_cast<size_t>(c.hosts) * c.gpus_per_host);
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  for (int h = 0; h < c.hosts; ++h) {
    char name[16];
    std::snprintf(name, sizeof name, "node%05d", h);
    t.hosts.push_back(
        {h,
         name,
         ipv4(10, h),
         {{"mlx5_0", "infiniband", ipv4(11, h)}, {"mlx5_1", "infiniband", ipv4(12, h)}}});
    for (int g = 0; g < c.gpus_per_host; ++g) {
      ddl::comm::RankPlacement r;
      r.rank = h * c.gpus_per_host + g;
      r.local_rank = g;
      r.host = h;
      r.gpu = g;
      const int socket = g / gpus_per_socket;
      char bus[16];
      std::snprintf(bus, sizeof bus, "%04x:%02x:00.0", socket * 0x30 + 4 + g % gpus_per_socket, 4);
      r.gpu_bus_id = bus;
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      char uuid[48];
      std::snprintf(uuid, sizeof uuid, "GPU-%08x-%04x-%04x-%04x-%012llx",
                    static_cast<unsigned>(seed >> 32), static_cast<unsigned>(seed >> 16) & 0xffff,
                    static_cast<unsigned>(seed) & 0xffff, static_cast<unsigned>(seed >> 48),
                    static_cast<unsigned long long>(seed & 0xffffffffffffULL));
      r.gpu_uuid = uuid;
      const int first = socket * kPusPerSocket + (g % gpus_per_socket) * pus_per_gpu;
      r.cpus.add(first, first + pus_per_gpu - 1);
      r.nic = socket == 0 ? "mlx5_0" : "mlx5_1";
      r.address = ipv4(socket == 0 ? 11 : 12, h);
      t.ranks.push_back(std::move(r));
    }
  }
  t.rings = ddl::comm::default_rings(t.mode.dims);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Runs `step` in a child process; false when it failed.
bool in_child(const std::function<void()>& step) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("topology_bench: fork");
    return false;
  }
  if (pid == 0) {
    int status = 0;
    try {
      step();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "topology_bench: %s\n", e.what());
      status = 1;
    }
    std::fflush(stdout);
    _exit(status);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool run_case(const Case& c, const std::string& dir, bool generic) {
  const std::string path = dir + "/" + c.name + ".yaml";
  std::printf("%s: %d hosts x %d GPUs = %d ranks, mode %s\n", c.name, c.hosts, c.gpus_per_host,
              c.hosts * c.gpus_per_host, c.mode);
  bool ok = in_child([&] {
    auto start = std::chrono::steady_clock::now();
    const Topology t = build(c);
    std::printf("  build           %7.3f s\n", seconds_since(start));
    start = std::chrono::steady_clock::now();
    ddl::comm::validate(t);
    std::printf("  validate        %7.3f s\n", seconds_since(start));
    start = std::chrono::steady_clock::now();
    ddl::comm::write_topology_file(t, path);
    const double write_s = seconds_since(start);
    struct stat st {};
    stat(path.c_str(), &st);
    std::printf("  write           %7.3f s   file %.2f MiB   writer peak RSS %.1f MiB\n", write_s,
                static_cast<double>(st.st_size) / (1024.0 * 1024.0), peak_rss_mib());
  });
  if (ok) {
    ok = in_child([&] {
      const auto start = std::chrono::steady_clock::now();
      const Topology t = ddl::comm::read_topology_file(path);
      std::printf("  read            %7.3f s   reader peak RSS %.1f MiB   %zu ranks\n",
                  seconds_since(start), peak_rss_mib(), t.ranks.size());
    });
  }
  if (ok && generic) {
    ok = in_child([&] {
      const auto start = std::chrono::steady_clock::now();
      const Topology t = ddl::comm::parse_topology_generic(slurp(path), path);
      std::printf("  read (yaml-cpp) %7.3f s   reader peak RSS %.1f MiB   %zu ranks\n",
                  seconds_since(start), peak_rss_mib(), t.ranks.size());
    });
  }
  std::remove(path.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool generic = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--generic") {
      generic = true;
    } else if (arg == "-h" || arg == "--help" || (!arg.empty() && arg[0] == '-') || !dir.empty()) {
      std::fprintf(stderr, "usage: topology_bench [--generic] [DIR]\n");
      return arg == "-h" || arg == "--help" ? 0 : 2;
    } else {
      dir = arg;
    }
  }
  bool made_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/topology_bench.XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("topology_bench: mkdtemp");
      return 1;
    }
    dir = pattern;
    made_dir = true;
  }
  const std::vector<Case> cases = {
      {"summit", 4608, 6, "p:6x18x256x1"},
      {"16384x8", 16384, 8, "p:8x64x256x1"},
  };
  bool ok = true;
  for (const Case& c : cases)
    ok = run_case(c, dir, generic) && ok;
  if (made_dir) rmdir(dir.c_str());
  return ok ? 0 : 1;
}
