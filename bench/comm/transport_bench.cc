// transport_bench: bandwidth of the TCP (loopback) and shared-memory transports between two
// processes on this host, for messages of 1 KiB to 64 MiB.
//
// How it works: the program forks; parent (rank 0) and child (rank 1) each make a device of
// one kind, trade addresses over pipes and connect. For every size, "one-way" is rank 0
// sending `iterations` messages that rank 1 receives, closed by a one-byte answer; "exchange"
// is both ranks sending and receiving a message at once through exchange(), and counts the
// bytes of one direction. Each size runs once untimed first. TCP runs with one socket per
// link and again striped over --streams sockets (default 4). Nothing is checked; run it by
// hand: transport_bench [--quick] [--streams N].

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/transport/link.h"

namespace {

using namespace ddl::comm::transport;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kTimeout = 30s;

void put_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  }
}

std::string get_line(int fd) {
  std::string s;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n')
    s.push_back(c);
  return s;
}

std::string size_text(size_t n) {
  if (n >= (1u << 20)) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n >> 10) + " KiB";
}

/// Rank 0 sends `iterations` messages of `size` bytes, rank 1 answers one byte at the end.
void one_way(Link& link, int rank, std::vector<std::byte>& buf, size_t size, int iterations) {
  std::byte ack[1] = {};
  for (int i = 0; i < iterations; ++i) {
    if (rank == 0) {
      exchange(&link, {buf.data(), size}, nullptr, {}, kTimeout);
    } else {
      exchange(nullptr, {}, &link, {buf.data(), size}, kTimeout);
    }
  }
  if (rank == 0) {
    exchange(nullptr, {}, &link, ack, kTimeout);
  } else {
    exchange(&link, ack, nullptr, {}, kTimeout);
  }
}

void both_ways(Link& link, std::vector<std::byte>& out, std::vector<std::byte>& in, size_t size,
               int iterations) {
  for (int i = 0; i < iterations; ++i)
    exchange(&link, {out.data(), size}, &link, {in.data(), size}, kTimeout);
}

/// Runs every size over one kind of link; rank 0 prints.
void run(const std::string& kind, Link& link, int rank, bool quick) {
  const size_t max = quick ? (1u << 20) : (64u << 20);
  std::vector<std::byte> out(max, std::byte{1});
  std::vector<std::byte> in(max);
  for (size_t size = 1024; size <= max; size *= 4) {
    const size_t budget = quick ? (16u << 20) : (512u << 20);
    const int iterations = static_cast<int>(std::clamp<size_t>(budget / size, 3, 2000));
    one_way(link, rank, out, size, 1);
    auto start = Clock::now();
    one_way(link, rank, out, size, iterations);
    const double t1 = std::chrono::duration<double>(Clock::now() - start).count();
    both_ways(link, out, in, size, 1);
    start = Clock::now();
    both_ways(link, out, in, size, iterations);
    const double t2 = std::chrono::duration<double>(Clock::now() - start).count();
    if (rank == 0) {
      const double bytes = static_cast<double>(size) * iterations;
      std::printf("%-6s %8s %8d %14.2f %14.2f\n", kind.c_str(), size_text(size).c_str(), iterations,
                  bytes / t1 / 1e9, bytes / t2 / 1e9);
      std::fflush(stdout);
    }
  }
}

/// One rank's side: for each kind, a device, the other's address over the pipes, a link.
void rank_main(int rank, int read_fd, int write_fd, bool quick, int streams) {
  const std::string job = "transport-bench-" + std::to_string(rank == 0 ? getpid() : getppid());
  for (int run_streams : {1, streams, 0}) {  // 0: shared memory
    if (run_streams == streams && streams == 1) continue;
    DeviceOptions o;
    o.rank = rank;
    o.job_id = job;
    o.token = "bench";
    o.bind_address = "127.0.0.1";
    o.streams = std::max(run_streams, 1);
    auto device = run_streams > 0 ? make_tcp_device(o) : make_shm_device(o);
    const std::string kind = run_streams == 0   ? "shm"
                             : run_streams == 1 ? "tcp"
                                                : "tcp*" + std::to_string(run_streams);
    put_line(write_fd, device->address());
    const std::string peer = get_line(read_fd);
    auto link =
        device->connect(1 - rank, "rank " + std::to_string(1 - rank) + " (bench)", peer, kTimeout);
    run(kind, *link, rank, quick);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int streams = 4;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--streams") == 0 && i + 1 < argc &&
               std::atoi(argv[i + 1]) > 0) {
      streams = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: transport_bench [--quick] [--streams N]\n");
      return 2;
    }
  }
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
    std::perror("transport_bench: error: pipe");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("transport_bench: error: fork");
    return 1;
  }
  const int rank = pid == 0 ? 1 : 0;
  int rc = 0;
  try {
    if (rank == 0) {
      std::printf(
          "two processes on this host; GB/s = 1e9 bytes/s, exchange counts one direction\n");
      std::printf("%-6s %8s %8s %14s %14s\n", "kind", "size", "iters", "one-way GB/s",
                  "exchange GB/s");
      rank_main(0, to_parent[0], to_child[1], quick, streams);
    } else {
      rank_main(1, to_child[0], to_parent[1], quick, streams);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transport_bench: error: rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  if (rank == 1) _exit(rc);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  return rc;
}
