// The link agent against strangers: the answer to its challenge has one deadline
// however slowly it trickles in, and a connection being served never delays ddlrun's requests
// nor the agent's end (~LocalAgent, a closed stdin); the token never crosses the wire (a
// recorder between two agents finds none of it); a port that drops connections is
// "unreachable" within a second.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mapper/link_probe.h"
#include "tests/lib/dial.h"
#include "tests/lib/link_agent_thread.h"
#include "tests/lib/out_of_descriptors.h"
#include "tests/lib/tcp_recorder.h"

namespace ddl::mapper {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// An agent in a thread over a socket pair (as LocalAgent runs one), greeted and given its
/// token; the destructor closes its channel and waits for it.
class Agent : public ddl::testing::LinkAgentThread {
 public:
  explicit Agent(const std::string& token = "t0k3n") {
    greet();
    authenticate(token);
  }
};

using ddl::testing::dial;

/// The line `fd` sends within 2 s, without its newline.
std::string line_of(int fd) {
  std::string out;
  char c = 0;
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 2000) == 1 && ::recv(fd, &c, 1, 0) == 1 && c != '\n')
    out += c;
  return out;
}

/// Whether `fd` was closed by the other side (within 6 s) before it sent anything.
bool closed_without_a_word(int fd) {
  pollfd p{fd, POLLIN, 0};
  char c = 0;
  return ::poll(&p, 1, 6000) == 1 && ::recv(fd, &c, 1, 0) == 0;
}

TEST(LinkAgentStrangerTest, ATrickledAnswerHasOneDeadlineInAll) {
  Agent agent;
  const int fd = dial(agent.port());
  const auto start = Clock::now();
  EXPECT_TRUE(parse_link_challenge(line_of(fd)).has_value());
  // One byte a second, never a newline: the agent used to wait 5 s for each byte.
  bool closed = false;
  for (int i = 0; i < 9 && !closed; ++i) {
    (void)::send(fd, "x", 1, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    char c;
    closed = ::poll(&p, 1, 1000) > 0 && ::recv(fd, &c, 1, 0) <= 0;
  }
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_LT(took, 6.5) << "the answer to the challenge gets 5 s in all";
}

TEST(LinkAgentStrangerTest, AStrangerDoesNotDelayRequests) {
  Agent agent;
  const int fd = dial(agent.port());
  std::this_thread::sleep_for(200ms);  // the agent is serving it
  const auto start = Clock::now();
  agent.send("hello");
  EXPECT_EQ(agent.line(), "error unknown request 'hello'");
  EXPECT_LT(Clock::now() - start, 1s);
  ::close(fd);
}

TEST(LinkAgentStrangerTest, AStrangerDoesNotDelayTheAgentsEnd) {
  auto agent = std::make_unique<Agent>();
  const int fd = dial(agent->port());
  (void)::send(fd, "t0k", 3, MSG_NOSIGNAL);
  std::this_thread::sleep_for(200ms);
  const auto start = Clock::now();
  agent.reset();  // as ~LocalAgent: the channel closes, the thread is joined
  EXPECT_LT(Clock::now() - start, 1s);
  ::close(fd);
}

// Out of descriptors (a flood of connections, a low ulimit -n) the agent leaves its listening
// socket alone for a moment each time instead of spinning on it (a core at 100% for as long
// as no descriptor freed), and takes the queued connection once one frees.
TEST(LinkAgentStrangerTest, OutOfDescriptorsTheAgentRestsThenTakesTheConnection) {
  const int status = ddl::testing::in_child([] {
    Agent agent;
    return ddl::testing::listener_out_of_descriptors(agent.port());
  });
  EXPECT_EQ(status, 0) << ddl::testing::out_of_descriptors_text(status);
}

TEST(LinkAgentChallengeTest, OnlyTheProofForItsNonceIsServed) {
  Agent agent;
  // The token itself, as version 1 sent it: refused.
  const int clear = dial(agent.port());
  const std::optional<std::string> nonce = parse_link_challenge(line_of(clear));
  ASSERT_TRUE(nonce.has_value());
  (void)::send(clear, "t0k3n\n", 6, MSG_NOSIGNAL);
  EXPECT_TRUE(closed_without_a_word(clear));
  ::close(clear);
  // A recorded proof, replayed against a fresh nonce: refused.
  const int replay = dial(agent.port());
  const std::optional<std::string> fresh = parse_link_challenge(line_of(replay));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_NE(*fresh, *nonce);
  const std::string old = link_proof("t0k3n", *nonce) + "\n";
  (void)::send(replay, old.data(), old.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(closed_without_a_word(replay));
  ::close(replay);
  // The proof for this connection's nonce: the pings are answered.
  const int good = dial(agent.port());
  const std::optional<std::string> mine = parse_link_challenge(line_of(good));
  ASSERT_TRUE(mine.has_value());
  const std::string proof = link_proof("t0k3n", *mine) + "\np";
  (void)::send(good, proof.data(), proof.size(), MSG_NOSIGNAL);
  char c = 0;
  pollfd p{good, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  EXPECT_EQ(::recv(good, &c, 1, 0), 1);
  EXPECT_EQ(c, 'p');
  ::close(good);
}

TEST(LinkAgentChallengeTest, ChallengeLines) {
  const std::string nonce(32, 'a');
  EXPECT_EQ(parse_link_challenge("ddl-link-test 2 " + nonce), nonce);
  EXPECT_FALSE(parse_link_challenge("ddl-link-test 2 " + nonce + "0"));
  EXPECT_FALSE(parse_link_challenge("ddl-link-test 2 " + std::string(32, 'A')));
  EXPECT_FALSE(parse_link_challenge("ddl-link-test 1 " + nonce));
  EXPECT_FALSE(parse_link_challenge("t0k3n"));
  EXPECT_EQ(link_proof("t0k3n", nonce).size(), 64u);
  EXPECT_NE(link_proof("t0k3n", nonce), link_proof("t0k3m", nonce));
}

TEST(LinkAgentChallengeTest, TheTokenNeverCrossesTheWire) {
  const std::string token = "link-token-" + std::string(40, 'z');
  Agent a(token), b(token);
  testing::TcpRecorder wire(b.port());
  a.send("test 127.0.0.1 " + std::to_string(wire.port()));
  const std::string reply = a.line();
  EXPECT_TRUE(reply.starts_with("ok ")) << reply;
  const std::string seen = wire.bytes();
  EXPECT_NE(seen.find("ddl-link-test 2 "), std::string::npos) << "no challenge recorded";
  EXPECT_EQ(seen.find(token), std::string::npos) << "the token crossed the wire";
}

TEST(LinkAgentUnreachableTest, APortThatDropsConnectionsIsUnreachableWithinASecond) {
  // A listener whose accept queue is full drops every further SYN, as a firewall's DROP does.
  const int full = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(full, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(full, 0), 0);
  ASSERT_EQ(::getsockname(full, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  std::vector<int> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    (void)::connect(queued.back(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  std::this_thread::sleep_for(100ms);
  Agent agent;
  const auto start = Clock::now();
  agent.send("test 127.0.0.1 " + std::to_string(port));
  EXPECT_EQ(agent.line(),
            "unreachable no answer from 127.0.0.1:" + std::to_string(port) + " within 1 s");
  EXPECT_LT(Clock::now() - start, 2s);
  for (const int fd : queued)
    ::close(fd);
  ::close(full);
}

}  // namespace
}  // namespace ddl::mapper
