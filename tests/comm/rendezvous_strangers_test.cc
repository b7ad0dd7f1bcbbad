// libddl's rendezvous server against strangers (as node 0's rendezvous): before a
// hello is accepted a connection is read no further than the hello, at most 32 such
// connections wait at once (the oldest is closed), refusals are closed at once and reported
// quoting a short printable prefix (a refused rank is told why, without waiting for it to read); a
// flood of strangers during the ranks' meeting neither keeps them out nor grows the server.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/digest.h"
#include "comm/bootstrap/bootstrap.h"
#include "tests/lib/dial.h"
#include "tests/lib/out_of_descriptors.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using ddl::testing::dial;

/// What the server reported, in order.
struct Reports {
  std::mutex mutex;
  std::vector<std::string> lines;
  RendezvousServer::Report sink() {
    return [this](const std::string& line) {
      const std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> get() {
    const std::lock_guard lock(mutex);
    return lines;
  }
};

/// This process's resident size in KiB.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return 0;
}

/// Whether the server closed `fd` within `limit` (after its challenge, which is read).
bool closed_by_server(int fd, std::chrono::milliseconds limit) {
  char buf[256];
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
  }
  return false;
}

std::vector<std::string> ranks_meet(const std::string& address, int n) {
  std::vector<std::future<std::vector<std::string>>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::async(std::launch::async, [&address, r, n] {
      auto b = make_rendezvous_bootstrap(address, "secret", r, n, 10s);
      b->allgather(std::string(100, static_cast<char>('a' + r)), 10s);
      return b->allgather("v" + std::to_string(r), 10s);
    }));
  }
  std::vector<std::string> last;
  for (auto& f : ranks)
    last = f.get();
  return last;
}

TEST(RendezvousStrangersTest, RefusalsAreReportedWithAShortPrintablePrefix) {
  Reports reports;
  RendezvousServer server("secret", 2, 0, {}, reports.sink());
  const int garbage = dial(server.port());
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n" + std::string(15, 'h');
  (void)::send(garbage, request.data(), request.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(closed_by_server(garbage, 2s));
  ::close(garbage);
  // A wrong token: the rank is refused, and its first round says why.
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  auto impostor = make_rendezvous_bootstrap(address, "guess", 1, 2, 5s);
  try {
    impostor->allgather("x", 1s);
    ADD_FAILURE() << "an impostor's round completed";
  } catch (const BootstrapError& e) {
    EXPECT_EQ(std::string(e.what()), "refused by the rendezvous at " + address +
                                         ": its proof of the job's token is wrong; is it a "
                                         "process of this job, started by its ddlrun?");
  }
  const std::vector<std::string> lines = reports.get();
  ASSERT_EQ(lines.size(), 2u);
  const std::string from = "rendezvous: refused a connection from 127.0.0.1:";
  EXPECT_TRUE(lines[0].starts_with(from)) << lines[0];
  EXPECT_TRUE(
      lines[0].ends_with(": it does not speak DDLRV2 (it sent 'GET / HTTP/1.1\\x0d\\x0aHost: "
                         "x\\x0d\\x0ahhhhhhh ... (40 bytes)')"))
      << lines[0];
  EXPECT_TRUE(lines[1].starts_with(from)) << lines[1];
  EXPECT_TRUE(lines[1].ends_with(": its proof of the job's token is wrong")) << lines[1];
}

TEST(RendezvousStrangersTest, TakenAndOutOfRangeRanksAreRefused) {
  Reports reports;
  RendezvousServer server("secret", 2, 0, {}, reports.sink());
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  auto first = make_rendezvous_bootstrap(address, "secret", 0, 2, 5s);
  std::this_thread::sleep_for(200ms);  // admitted
  auto again = make_rendezvous_bootstrap(address, "secret", 0, 2, 5s);
  auto beyond = make_rendezvous_bootstrap(address, "secret", 7, 2, 5s);
  auto other = make_rendezvous_bootstrap(address, "secret", 1, 3, 5s);
  std::this_thread::sleep_for(300ms);
  const std::vector<std::string> lines = reports.get();
  ASSERT_EQ(lines.size(), 3u);
  std::vector<std::string> why;
  for (const std::string& l : lines)
    why.push_back(l.substr(l.find(": ", l.find("from ")) + 2));
  std::sort(why.begin(), why.end());
  EXPECT_EQ(why, (std::vector<std::string>{"it is of a job of 3 ranks, not 2",
                                           "rank 0 came already", "rank 7 is out of range 0..1"}));
}

TEST(RendezvousStrangersTest, AFloodOfStrangersNeitherKeepsRanksOutNorGrowsTheServer) {
  Reports reports;
  RendezvousServer server("secret", 4, 0, {}, reports.sink());
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  const long before = rss_kib();
  std::atomic<bool> stop{false};
  std::vector<int> idle;
  // 100 connections that say nothing, then a stream of megabytes after the magic on others.
  for (int i = 0; i < 100; ++i)
    idle.push_back(dial(server.port()));
  std::thread streams([&] {
    const std::string chunk = "DDLRV2" + std::string(1 << 20, 'x');
    while (!stop) {
      const int fd = dial(server.port());
      for (int k = 0; k < 64 && !stop; ++k) {
        if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
      }
      ::close(fd);
    }
  });
  const std::vector<std::string> got = ranks_meet(address, 4);
  stop = true;
  streams.join();
  EXPECT_EQ(got, (std::vector<std::string>{"v0", "v1", "v2", "v3"}));
  int open = 0;
  for (const int fd : idle) {
    open += closed_by_server(fd, 100ms) ? 0 : 1;
    ::close(fd);
  }
  EXPECT_LE(open, 32) << "strangers waiting at once";
  EXPECT_LT(rss_kib() - before, 64 << 10) << "KiB more after the flood";
  const std::vector<std::string> lines = reports.get();
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "rendezvous: more than 32 connections have not said hello; closing the "
                      "oldest (is something other than this job's ranks connecting to port " +
                          std::to_string(server.port()) + "?)"),
            lines.end());
  EXPECT_LE(lines.size(), 12u) << "the first ten refusals, one line for the rest, the cap's";
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

/// Rank `rank` of a job of 2 by hand: a connection that says hello with the right proof and
/// receives through a small buffer (so that unread answers soon fill what the server can
/// queue), running `before_hello` between the challenge and the hello; -1 on failure.
int hand_rank(int port, const std::string& token, uint32_t rank,
              const std::function<void()>& before_hello = {}) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);  // before connect: the window
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  char challenge[22];
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::recv(fd, challenge, sizeof challenge, MSG_WAITALL) != 22) {
    ::close(fd);
    return -1;
  }
  std::string message = "libddl rendezvous rank: " + std::string(challenge + 6, 16);
  put_u32(message, rank);
  put_u32(message, 2);
  std::string hello = "DDLRV2";
  put_u32(hello, rank);
  put_u32(hello, 2);
  hello += base::bytes(base::hmac_sha256(token, message));
  if (before_hello) before_hello();
  ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  return fd;
}

/// Whether `fd` ends (end of file or an error) within `limit`, reading all that comes.
bool ends_within(int fd, std::chrono::milliseconds limit) {
  std::vector<char> buf(1 << 20);
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
  }
  return false;
}

// A rank that takes none of its answers (stopped, hung) is cut off once the server can queue
// no more of them and 5 s pass: the other rank still gets its round answered. The server
// waited for it for ever, and so every rank of the job.
TEST(RendezvousStrangersTest, ARankThatStopsReadingIsCutOffAndTheOtherAnswered) {
  const std::string token = "t0k3n";
  RendezvousServer server(token, 2);
  const int deaf = hand_rank(server.port(), token, 0);
  ASSERT_GE(deaf, 0);
  auto rank1 =
      make_rendezvous_bootstrap("127.0.0.1:" + std::to_string(server.port()), token, 1, 2, 5s);
  const std::string value(1u << 20, 'v');
  bool stalled = false;
  for (uint32_t round = 0; round < 4 && !stalled; ++round) {
    std::string msg;
    put_u32(msg, round);
    put_u32(msg, 60'000);
    put_u32(msg, static_cast<uint32_t>(value.size()));
    ASSERT_EQ(::send(deaf, (msg + value).data(), msg.size() + value.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(msg.size() + value.size()));
    const auto start = std::chrono::steady_clock::now();
    try {
      EXPECT_EQ(rank1->allgather(value, 10s).size(), 2u);
    } catch (const BootstrapError& e) {
      FAIL() << "round " << round << ": " << e.what();
    }
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, 9s) << "round " << round;
    stalled = took >= 4s;  // the server's queue to the deaf rank was full: it waited 5 s
  }
  EXPECT_TRUE(stalled) << "4 rounds of 2 MiB answers never filled the deaf rank's queue";
  EXPECT_TRUE(ends_within(deaf, 5000ms)) << "the deaf rank was not cut off";
  ::close(deaf);
}

// A rank's connection keeps its place for its grace (200 ms) however many strangers come
// after it: 40 arrive between its challenge and its hello (32 may wait), and it still gets
// in. Before, the oldest waiting connection was closed at once: the rank's.
TEST(RendezvousStrangersTest, ARankKeepsItsPlaceForItsGraceDuringAFlood) {
  const std::string token = "t0k3n";
  RendezvousServer server(token, 2);
  std::vector<int> strangers;
  const int rank0 = hand_rank(server.port(), token, 0, [&] {
    for (int i = 0; i < 40; ++i)
      strangers.push_back(dial(server.port()));
    char challenge[22];
    for (int i = 0; i < 31; ++i) {  // the places left beside the rank's
      EXPECT_EQ(::recv(strangers[static_cast<size_t>(i)], challenge, sizeof challenge, MSG_WAITALL),
                22)
          << "stranger " << i;
    }
    std::this_thread::sleep_for(30ms);  // time for the next to take a place, were there one
  });
  ASSERT_GE(rank0, 0);
  std::string round;
  put_u32(round, 0);
  put_u32(round, 5000);
  put_u32(round, 2);
  round += "v0";
  ::send(rank0, round.data(), round.size(), MSG_NOSIGNAL);
  auto rank1 =
      make_rendezvous_bootstrap("127.0.0.1:" + std::to_string(server.port()), token, 1, 2, 5s);
  try {
    EXPECT_EQ(rank1->allgather("v1", 5s), (std::vector<std::string>{"v0", "v1"}));
  } catch (const BootstrapError& e) {
    ADD_FAILURE() << "the flood crowded rank 0 out: " << e.what();
  }
  ::close(rank0);
  for (int fd : strangers)
    ::close(fd);
}

// Out of descriptors (a flood of connections, a low ulimit -n) the server leaves its listening
// socket alone for a moment each time instead of spinning on it (a core at 100% for as long
// as no descriptor freed), and takes the queued connection once one frees.
TEST(RendezvousStrangers, OutOfDescriptorsTheServerRestsThenTakesTheConnection) {
  const int status = ddl::testing::in_child([] {
    RendezvousServer server("t0k3n", 2);
    return ddl::testing::listener_out_of_descriptors(server.port());
  });
  EXPECT_EQ(status, 0) << ddl::testing::out_of_descriptors_text(status);
}

}  // namespace
}  // namespace ddl::comm
