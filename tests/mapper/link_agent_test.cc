// The link agent against strangers (issue 27): the token line has one deadline however slowly
// it trickles in, and a connection being served never delays ddlrun's requests nor the agent's
// end (~LocalAgent, a closed stdin).

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
#include <string>
#include <thread>

#include "mapper/link_probe.h"

namespace ddl::mapper {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// An agent in a thread over a socket pair (as LocalAgent runs one); the destructor closes its
/// channel and waits for it.
class Agent {
 public:
  Agent() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    thread_ = std::thread([this] { run_link_agent(fds_[1], fds_[1]); });
    const std::string greeting = line();
    EXPECT_EQ(std::sscanf(greeting.c_str(), "ddl-link-agent 1 %d", &port_), 1) << greeting;
    send("token t0k3n");
    EXPECT_EQ(line(), "ready");
  }
  ~Agent() {
    ::shutdown(fds_[0], SHUT_RDWR);
    thread_.join();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void send(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(fds_[0], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  std::string line() {
    std::string out;
    char c = 0;
    while (::read(fds_[0], &c, 1) == 1 && c != '\n')
      out += c;
    return out;
  }
  int port() const { return port_; }

 private:
  int fds_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

int dial(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

TEST(LinkAgentStrangerTest, ATrickledTokenLineHasOneDeadlineInAll) {
  Agent agent;
  const int fd = dial(agent.port());
  const auto start = Clock::now();
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
  EXPECT_LT(took, 6.5) << "the token line gets 5 s in all";
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

}  // namespace
}  // namespace ddl::mapper
