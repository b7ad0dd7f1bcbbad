// libddl's TCP transport against a flood of connections that never say hello, over real
// loopback sockets: the acceptor keeps at most 64 of them (its descriptors stay bounded), an
// accepted connection keeps its place for its grace, and an initiator whose connection is
// closed unanswered connects again until its deadline (comm/transport/tcp/tcp.cc).

#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "comm/transport/link.h"
#include "comm/transport/tcp/hello.h"
#include "tests/lib/dial.h"

namespace ddl::comm::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ddl::testing::dial;
using ddl::testing::read_within;

/// The acceptor's cap on connections waiting for their hello (tcp.cc, kMaxPending).
constexpr int kMaxPending = 64;

/// The descriptors this process has open.
int open_descriptors() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr)
    ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

int port_of(const Device& d) {
  const std::string a = d.address();
  return std::stoi(a.substr(a.rfind(':') + 1));
}

DeviceOptions options(int rank) {
  DeviceOptions o;
  o.rank = rank;
  o.token = "t";
  o.bind_address = "127.0.0.1";
  return o;
}

/// The hello of rank 0 (of one stream) to rank 1 that answers `challenge` with token "t".
std::string hello_for(const std::string& challenge) {
  const auto c = tcp::decode_challenge(challenge);
  EXPECT_TRUE(c.has_value());
  const tcp::Nonce nonce = c ? c->nonce : tcp::Nonce{};
  return tcp::encode(tcp::Hello{0, 0, 1, tcp::hello_proof("t", nonce, 0, 1, 0, 1)});
}

/// The child of AFloodOfSilentStrangersLeavesRoomForTheRealPeer: rank 1, allowed 150
/// descriptors more than it has once its device is made. Writes its port to `out`, takes rank
/// 0's link, then writes how many more descriptors it has open than before the flood.
[[noreturn]] void flooded_rank(int out) {
  auto d = make_tcp_device(options(1));
  const int before = open_descriptors();
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = static_cast<rlim_t>(before + 150);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(3);
  const int port = port_of(*d);
  if (write(out, &port, sizeof port) != sizeof port) _exit(4);
  try {
    auto link = d->connect(0, "rank 0 (test)", "", 12s);
    const int used = open_descriptors() - before;
    _exit(write(out, &used, sizeof used) == sizeof used ? 0 : 4);
  } catch (const TransportError& e) {
    std::fprintf(stderr, "flooded rank: %s\n", e.what());
    _exit(2);
  }
}

// 300 connections that never say hello, then rank 0's: rank 1 accepts every one, keeping at
// most 64 waiting (the oldest closed once past its grace), so rank 0 gets in within a second
// or so and rank 1 holds about 65 descriptors. Before the cap, rank 1 accepted strangers until
// its 150 descriptors were gone and took the next only as their 5 s hello time ran out: rank
// 0, queued behind them, got in after 5 s, past its 4 s deadline.
TEST(TcpFlood, AFloodOfSilentStrangersLeavesRoomForTheRealPeer) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();  // out of its own descriptors, in a child
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipe_fds[0]);
    flooded_rank(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  int port = 0;
  ASSERT_EQ(read(pipe_fds[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<int> strangers;
  for (int i = 0; i < 300; ++i)
    strangers.push_back(dial(port));
  auto rank0 = make_tcp_device(options(0));
  const auto start = Clock::now();
  try {
    auto link = rank0->connect(1, "rank 1 (test)", "127.0.0.1:" + std::to_string(port), 4s);
    std::printf("rank 0 got in after %.2f s\n",
                std::chrono::duration<double>(Clock::now() - start).count());
  } catch (const TransportError& e) {
    ADD_FAILURE() << "a flood of strangers kept the real peer out: " << e.what();
  }
  int used = -1;
  EXPECT_EQ(read(pipe_fds[0], &used, sizeof used), static_cast<ssize_t>(sizeof used));
  EXPECT_GE(used, 1);
  EXPECT_LE(used, kMaxPending + 2) << "descriptors the flood cost rank 1";
  close(pipe_fds[0]);
  for (int fd : strangers)
    close(fd);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// A connection accepted keeps its place while 64 more arrive: the 64th waits in the queue,
// unchallenged, until the first has said its hello (or had its grace, 200 ms).
TEST(TcpFlood, AnAcceptedConnectionKeepsItsPlaceForItsGrace) {
  auto rank1 = make_tcp_device(options(1));
  const int port = port_of(*rank1);
  const int peer = dial(port);
  const std::string challenge = read_within(peer, tcp::kChallengeSize, 2000ms);
  ASSERT_EQ(challenge.size(), tcp::kChallengeSize);
  const auto accepted = Clock::now();
  // 63 more fill the acceptor's 64 places (dialled first, then read: a few milliseconds even
  // on a loaded machine, well within the first one's 200 ms), the 64th waits in the queue.
  std::vector<int> strangers;
  for (int i = 0; i + 1 < kMaxPending; ++i)
    strangers.push_back(dial(port));
  for (size_t i = 0; i < strangers.size(); ++i) {
    EXPECT_EQ(read_within(strangers[i], tcp::kChallengeSize, 2000ms).size(), tcp::kChallengeSize)
        << "stranger " << i;
  }
  strangers.push_back(dial(port));
  EXPECT_EQ(read_within(strangers.back(), 1, 20ms), "") << "the 65th was taken at once";
  const std::string hello = hello_for(challenge);
  ASSERT_EQ(send(peer, hello.data(), hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(hello.size()));
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - accepted);
  EXPECT_EQ(read_within(peer, 1, 2000ms), std::string(1, tcp::kAccepted))
      << "the first was closed although it answered " << age.count() << " ms after its challenge";
  EXPECT_EQ(read_within(strangers.back(), tcp::kChallengeSize, 2000ms).size(), tcp::kChallengeSize)
      << "the 65th was not taken once the first made room";
  EXPECT_NO_THROW(rank1->connect(0, "rank 0 (test)", "", 1s));
  close(peer);
  for (int fd : strangers)
    close(fd);
}

/// A stand-in for a crowded acceptor (rank 1, token "t") on loopback: it challenges each
/// connection; the first `closes` it closes unanswered (the odd ones at once, the even ones
/// after reading the hello), the next it answers 'K' when the hello is right.
class CrowdedAcceptor {
 public:
  explicit CrowdedAcceptor(int closes) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, closes] { serve(closes); });
  }
  ~CrowdedAcceptor() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    if (kept_ >= 0) close(kept_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_; }

 private:
  void serve(int closes) {
    for (int i = 0;; ++i) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      const std::string challenge = tcp::encode(tcp::Challenge{1, base::net::nonce()});
      send(c, challenge.data(), challenge.size(), MSG_NOSIGNAL);
      const std::string hello =
          i % 2 == 0 && i < closes ? "" : read_within(c, tcp::kHelloSize, 2000ms);
      if (i >= closes && hello == hello_for(challenge)) {
        send(c, &tcp::kAccepted, 1, MSG_NOSIGNAL);
        kept_ = c;
        continue;
      }
      close(c);
    }
  }
  int fd_;
  int port_ = 0;
  int kept_ = -1;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// An initiator whose connection is closed after the challenge without an answer (what an
// acceptor crowded by strangers does) connects again, and gets in on its third try. Before,
// it took the close for a refusal and gave up.
TEST(TcpFlood, AnInitiatorClosedUnansweredConnectsAgain) {
  CrowdedAcceptor acceptor(2);
  auto rank0 = make_tcp_device(options(0));
  EXPECT_NO_THROW(rank0->connect(1, "rank 1 (test)", acceptor.address(), 5s));
  EXPECT_EQ(acceptor.connections(), 3);
}

// Crowded out until its deadline, it says so: how often, and where to read about it.
TEST(TcpFlood, AnInitiatorCrowdedOutUntilItsDeadlineSaysHowOften) {
  CrowdedAcceptor acceptor(1000);
  auto rank0 = make_tcp_device(options(0));
  try {
    rank0->connect(1, "rank 1 (test)", acceptor.address(), 1s);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::regex_replace(e.what(), std::regex(", [0-9]+ times"), ", N times"),
              "rank 1 (test): cannot connect to " + acceptor.address() +
                  " within 1 s: it closed the connection before answering this rank's hello, "
                  "N times (is a flood of connections reaching it? see libddl(3), TRANSPORTS)");
  }
  // 50, 100, 200, 400 ms between tries: about 5 in 1 s, not one every 50 ms.
  EXPECT_GE(acceptor.connections(), 3);
  EXPECT_LE(acceptor.connections(), 6);
}

// A wrong hello is refused with 'N', and the initiator gives up at once (no retry).
TEST(TcpFlood, ARefusalIsToldAndNotTriedAgain) {
  auto rank1 = make_tcp_device(options(1));
  DeviceOptions o = options(0);
  o.token = "wrong";
  auto impostor = make_tcp_device(o);
  const auto start = Clock::now();
  EXPECT_THROW(impostor->connect(1, "rank 1 (test)", rank1->address(), 5s), TransportError);
  EXPECT_LT(Clock::now() - start, 2s);
  const int fd = dial(port_of(*rank1));
  ASSERT_EQ(read_within(fd, tcp::kChallengeSize, 2000ms).size(), tcp::kChallengeSize);
  const std::string wrong(tcp::kHelloSize, 'x');
  ASSERT_EQ(send(fd, wrong.data(), wrong.size(), MSG_NOSIGNAL), static_cast<ssize_t>(wrong.size()));
  EXPECT_EQ(read_within(fd, 2, 2000ms), std::string(1, tcp::kRefused));
  close(fd);
}

// An acceptor of another libddl version (the previous magic, DDLTCP1) is refused by the magic
// check, named as no ddl TCP transport, before this rank sends any proof.
TEST(TcpFlood, AnAcceptorOfAnotherVersionIsNoTransport) {
  const base::net::Listening l = base::net::listen_tcp("127.0.0.1", 0, 4);
  ASSERT_GE(l.fd, 0);
  std::thread acceptor([&] {
    pollfd p{l.fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return;
    const int c = accept(l.fd, nullptr, nullptr);
    std::string old("DDLTCP1\0\0\0\0\x01", 12);
    old += base::net::nonce();
    send(c, old.data(), old.size(), MSG_NOSIGNAL);
    read_within(c, tcp::kHelloSize, 2000ms);
    close(c);
  });
  auto rank0 = make_tcp_device(options(0));
  const std::string address = "127.0.0.1:" + std::to_string(l.port);
  try {
    rank0->connect(1, "rank 1 (test)", address, 5s);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(), ("rank 1 (test): " + address + " is not a ddl TCP transport").c_str());
  }
  acceptor.join();
  close(l.fd);
}

}  // namespace
}  // namespace ddl::comm::transport
