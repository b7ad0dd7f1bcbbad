// Strangers against per-node mode's rendezvous and the link agent: five attacks, run in this
// process against node 0's NodeServer and a link agent, with the figures each gives.
// bench/wire_attack.sh builds it from the sources of two commits (main and the branch) and
// prints both; it speaks only what both versions share.
//
//   flood     20 connections each send a 64 MiB length prefix and then 64 MiB: peak
//             resident size, and whether node 0 lived (each case runs in a child process
//             limited to 768 MiB of address space);
//   fields    one connection sends 64 fields of 1 MiB: CPU seconds node 0 spent;
//   refusals  six strangers send a hello with a wrong token and a 20 MB node rank and
//             never read: how long a real node then takes to join, and the longest line node 0
//             printed;
//   agent     a stranger trickles a byte every 4 s into a link agent's port: how long
//             ~LocalAgent (the agent's end) takes;
//   secrets   2 nodes join through a recording proxy: how often the secret and the
//             ranks' token appear in the bytes.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddlrun/per_node/node_wire.h"
#include "ddlrun/per_node/rendezvous.h"
#include "mapper/link_probe.h"
#include "tests/lib/tcp_recorder.h"

namespace {

using namespace ddl::ddlrun;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "s3cret-of-the-job-7f3a9c";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// The old server took the ranks' token in its settings; the new one derives it.
template <typename S>
void give_ranks_token(S& s) {
  if constexpr (requires { s.job_token; }) s.job_token = "ranks-token-5e8d21";
}

struct Node0 {
  explicit Node0(int nnodes) {
    NodeServer::Settings s;
    s.token = kSecret;
    s.nnodes = nnodes;
    s.timeout = 60000ms;
    s.job_id = "job7";
    give_ranks_token(s);
    server = std::make_unique<NodeServer>(s, [this](const std::string& line) {
      std::lock_guard lock(mutex);
      longest = std::max(longest, line.size());
      ++lines;
    });
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(server->port()); }
  std::unique_ptr<NodeServer> server;
  std::mutex mutex;
  size_t longest = 0;
  int lines = 0;
};

int dial(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

std::string header(uint32_t count, uint32_t first_length) {
  std::string h(1, static_cast<char>(wire::kHello));
  for (uint32_t v : {count, first_length})
    for (int shift = 24; shift >= 0; shift -= 8)
      h.push_back(static_cast<char>((v >> shift) & 0xff));
  return h;
}

/// Sends `size` bytes of 'x' (or until the peer closes); how many went.
size_t send_filler(int fd, size_t size) {
  static const std::string chunk(1 << 16, 'x');
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, chunk.data(), std::min(chunk.size(), size - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

std::unique_ptr<NodeClient> join(const std::string& endpoint, int node, int nnodes) {
  NodeHello h{node, nnodes, "", "host" + std::to_string(node), "inventory"};
  return NodeClient::join(endpoint, kSecret, h, 20000ms);
}

void flood() {
  Node0 n0(2);
  std::vector<std::thread> strangers;
  for (int i = 0; i < 20; ++i) {
    strangers.emplace_back([&] {
      const int fd = dial(n0.server->port());
      // Just under the old limit of 64 MiB for a whole message.
      const std::string h = header(9, (64u << 20) - 64);
      (void)::send(fd, h.data(), h.size(), MSG_NOSIGNAL);
      send_filler(fd, size_t{64} << 20);
      ::close(fd);
    });
  }
  for (auto& t : strangers)
    t.join();
  std::this_thread::sleep_for(500ms);
  std::printf("flood     20 x 64 MiB prefixes: node 0 lived, peak resident %ld MiB\n",
              status_kib("VmHWM:") / 1024);
}

void fields() {
  Node0 n0(2);
  const double before = cpu_seconds();
  const auto start = Clock::now();
  const int fd = dial(n0.server->port());
  std::string h(1, static_cast<char>(wire::kPlan));
  for (uint32_t v : {64u})
    for (int shift = 24; shift >= 0; shift -= 8)
      h.push_back(static_cast<char>((v >> shift) & 0xff));
  (void)::send(fd, h.data(), h.size(), MSG_NOSIGNAL);
  size_t sent = 0;
  for (int i = 0; i < 64; ++i) {
    std::string len;
    for (int shift = 24; shift >= 0; shift -= 8)
      len.push_back(static_cast<char>(((1u << 20) >> shift) & 0xff));
    if (::send(fd, len.data(), len.size(), MSG_NOSIGNAL) <= 0) break;
    const size_t n = send_filler(fd, 1u << 20);
    sent += n;
    if (n < (1u << 20)) break;
  }
  ::close(fd);
  std::this_thread::sleep_for(200ms);
  const double cpu = cpu_seconds() - before;
  std::printf(
      "fields    64 x 1 MiB fields: node 0 took %zu MiB in %.2f s, %.2f s of CPU (%.3f s "
      "a MiB)\n",
      sent >> 20, seconds_since(start), cpu, sent ? cpu / (double(sent) / (1 << 20)) : 0.0);
}

void refusals() {
  Node0 n0(2);
  std::vector<int> strangers;
  const bool old = std::strcmp(wire::kMagic, "DDLNODE2") == 0;
  for (int i = 0; i < 6; ++i) {
    const int fd = dial(n0.server->port());
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // The 20 MB field is the node rank, which the refusal quotes.
    std::vector<std::string> f = {
        wire::kMagic, "guess", std::string(20'000'000, '1'), "2", "", "host9", "", "0"};
    if (!old) f.insert(f.begin() + 1, std::string(16, 'n'));
    std::thread([fd, bytes = wire::encode(wire::kHello, f)] {
      (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }).detach();
    strangers.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  const auto start = Clock::now();
  auto one = std::async(std::launch::async, [&] { return join(n0.endpoint(), 1, 2); });
  join(n0.endpoint(), 0, 2);
  one.get();
  const double took = seconds_since(start);
  std::lock_guard lock(n0.mutex);
  std::printf(
      "refusals  6 strangers that never read: a node joins in %.2f s; node 0 printed "
      "%d lines, the longest %zu bytes\n",
      took, n0.lines, n0.longest);
  for (int fd : strangers)
    ::close(fd);
}

void agent() {
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
  std::thread agent([fd = fds[1]] { ddl::mapper::run_link_agent(fd, fd); });
  char greeting[128] = {};
  (void)!::read(fds[0], greeting, sizeof greeting - 1);
  int port = 0;
  std::sscanf(greeting, "ddl-link-agent %*d %d", &port);  // version 1 or 2
  (void)!::write(fds[0], "token t0k3n\n", 12);
  char ready[16] = {};  // the agent took the token: it now serves what connects
  (void)!::read(fds[0], ready, sizeof ready - 1);
  std::atomic<bool> done{false}, connected{false};
  std::thread stranger([&] {
    const int fd = dial(port);
    connected = true;
    for (int i = 0; i < 5 && !done; ++i) {  // a byte every 4 s, 20 s at most
      (void)::send(fd, "x", 1, MSG_NOSIGNAL);
      for (int k = 0; k < 40 && !done; ++k)
        std::this_thread::sleep_for(100ms);
    }
    ::close(fd);
  });
  while (!connected)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(1s);  // the agent accepts it and waits for its token line
  const auto start = Clock::now();
  ::shutdown(fds[0], SHUT_RDWR);  // what ~LocalAgent does, then it joins
  agent.join();
  const double took = seconds_since(start);
  done = true;
  stranger.join();
  std::printf("agent     a byte every 4 s from a stranger: ~LocalAgent took %.2f s\n", took);
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

void secrets() {
  Node0 n0(2);
  ddl::testing::TcpRecorder link(n0.server->port());
  const std::string endpoint = "127.0.0.1:" + std::to_string(link.port());
  auto one = std::async(std::launch::async, [&] { return join(endpoint, 1, 2); });
  auto zero = join(endpoint, 0, 2);
  auto other = one.get();
  std::this_thread::sleep_for(200ms);
  const std::string seen = link.bytes();
  const std::string token = zero->welcome().job_token;
  std::printf(
      "secrets   2 nodes, %zu bytes on the link: the secret %zu times, the ranks' token "
      "%zu times\n",
      seen.size(), count(seen, kSecret), token.empty() ? 0 : count(seen, token));
}

/// Runs `f` in a child limited to 768 MiB of address space; says how the child ended.
void isolated(const char* name, const std::function<void()>& f) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    rlimit limit{size_t{768} << 20, size_t{768} << 20};
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      f();
    } catch (const std::exception& e) {
      std::printf("%-9s failed: %s\n", name, e.what());
    }
    std::fflush(stdout);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    std::printf("%-9s node 0 died: signal %d (%s)\n", name, WTERMSIG(status),
                strsignal(WTERMSIG(status)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<const char*, void (*)()>> cases = {{"flood", flood},
                                                                 {"fields", fields},
                                                                 {"refusals", refusals},
                                                                 {"agent", agent},
                                                                 {"secrets", secrets}};
  for (const auto& [name, f] : cases) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i)
      wanted = wanted || std::strcmp(argv[i], name) == 0;
    if (wanted) isolated(name, f);
  }
  return 0;
}
