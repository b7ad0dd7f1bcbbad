// libddl's rendezvous client (comm/bootstrap/rendezvous.cc) against a server that is not
// ddlrun's, over real loopback sockets: one that answers garbage, announces a huge length,
// sends a hostile error message, trickles, says nothing, stops reading, or never completes a
// connect. Each must end within the rank's deadline in an error that names the server's
// address and the next step, allocating nothing the server did not send.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/bootstrap/bootstrap.h"
#include "tests/lib/dial.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ddl::testing::read_within;

std::string u32(uint32_t v) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
  return out;
}

/// `text` with `address` (where it occurs) as ADDR.
std::string without(std::string text, const std::string& address) {
  const size_t at = text.find(address);
  return at == std::string::npos ? text : text.replace(at, address.size(), "ADDR");
}

void give(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

/// A server on loopback that takes one connection and plays `script` on it, keeping the
/// connection open until it is destroyed (unless the script closes it, setting it to -1).
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int&)> script, int backlog = 4)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, backlog), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (script) {
      thread_ = std::thread([this, script] {
        conn_ = accept(fd_, nullptr, nullptr);
        if (conn_ >= 0) script(conn_);
      });
    }
  }
  ~FakeServer() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (conn_ >= 0) close(conn_);
    close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
  int conn_ = -1;
  std::thread thread_;
};

/// The challenge of a DDLRV2 server, then the rank's hello (46 bytes) and its first round's
/// header and value (`value` bytes) read.
void handshake(int fd, size_t value = 1) {
  give(fd, "DDLRV2" + std::string(16, 'n'));
  read_within(fd, 46 + 12 + value, 5s);
}

/// What rank 0 of 2 says when its first round (a 1-byte value, timeout `round`) meets `script`.
std::string first_round(const std::function<void(int&)>& script,
                        std::chrono::milliseconds round = 2000ms) {
  FakeServer server(script);
  try {
    auto rank = make_rendezvous_bootstrap(server.address(), "t0k3n", 0, 2, 2s);
    rank->allgather("v", round);
    return "no error";
  } catch (const BootstrapError& e) {
    return without(e.what(), server.address());
  }
}

TEST(RendezvousClient, AServerThatDoesNotSpeakDdlrv2IsNamedWithWhatItSent) {
  FakeServer server([](int fd) { give(fd, "HTTP/1.1 400 Bad Request\r\n\r\n"); });
  try {
    make_rendezvous_bootstrap(server.address(), "t0k3n", 3, 4, 2s);
    ADD_FAILURE() << "joined";
  } catch (const BootstrapError& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 3: the rendezvous at " + server.address() +
                  " does not speak DDLRV2 (it sent 'HTTP/1.1 400 Bad Reque'; is something other "
                  "than this job's ddlrun listening there?)");
  }
}

TEST(RendezvousClient, AServerThatClosesBeforeItsChallengeIsNamed) {
  FakeServer server([](int fd) {
    give(fd, "DDL");
    shutdown(fd, SHUT_WR);
  });
  try {
    make_rendezvous_bootstrap(server.address(), "t0k3n", 0, 2, 2s);
    ADD_FAILURE() << "joined";
  } catch (const BootstrapError& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0: the rendezvous at " + server.address() +
                                         " closed the connection before its challenge (is it "
                                         "this version's ddlrun? see its output)");
  }
}

// A length or a count that no DDLRV2 server sends is refused before anything is allocated
// for it, naming the server.
TEST(RendezvousClient, AHugeLengthOrAWrongCountIsAProtocolErrorNamingTheServer) {
  const std::string tail = " (is something other than this job's ddlrun listening there?)";
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              give(fd, u32(1) + u32(0xffffffff));
            }),
            "rank 0: the rendezvous at ADDR sent what is no DDLRV2 answer: an error message of "
            "4294967295 bytes, over the 1 MiB limit" +
                tail);
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              give(fd, u32(0) + u32(3));
            }),
            "rank 0: the rendezvous at ADDR sent what is no DDLRV2 answer: 3 values for a job of "
            "2 ranks" +
                tail);
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              give(fd, u32(0) + u32(2) + u32(1) + "a" + u32(0x80000000));
            }),
            "rank 0: the rendezvous at ADDR sent what is no DDLRV2 answer: rank 1's value of "
            "2147483648 bytes, over the 1 MiB limit" +
                tail);
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              give(fd, "<html><body>");
            }),
            "rank 0: the rendezvous at ADDR sent what is no DDLRV2 answer: '<html><b'" + tail);
}

// A failed round's message is the server's own words: control bytes are shown escaped (no
// terminal escape reaches the user's screen) and a long one is cut.
TEST(RendezvousClient, AFailedRoundsMessageIsShownPrintableAndShort) {
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              const std::string m = "\x1b[2Jranks 1 (node1) left\n";
              give(fd, u32(1) + u32(static_cast<uint32_t>(m.size())) + m);
            }),
            "\\x1b[2Jranks 1 (node1) left\\x0a");
  EXPECT_EQ(first_round([](int fd) {
              handshake(fd);
              const std::string m(100000, 'x');
              give(fd, u32(1) + u32(static_cast<uint32_t>(m.size())) + m);
            }),
            std::string(4096, 'x') + " ... (100000 bytes)");
}

// A host that never completes the connect (its listening queue full: the SYN is dropped) is
// given up at the deadline. Before, connect() blocked for the kernel's two minutes.
TEST(RendezvousClient, AConnectNeverAnsweredEndsAtTheDeadline) {
  FakeServer server(nullptr, 0);
  const int filler = ddl::testing::dial(server.port());  // fills the queue of length 0
  const auto start = Clock::now();
  auto joining = std::async(std::launch::async, [&] {
    try {
      make_rendezvous_bootstrap(server.address(), "t0k3n", 0, 2, 500ms);
      return std::string("joined");
    } catch (const BootstrapError& e) {
      return std::string(e.what());
    }
  });
  ASSERT_EQ(joining.wait_for(5s), std::future_status::ready) << "still connecting after 5 s";
  EXPECT_EQ(joining.get(), "rank 0: cannot reach the rendezvous at " + server.address() +
                               " within 0.5 s: Connection timed out (is ddlrun still running, "
                               "and is that address reachable from this host?)");
  EXPECT_LT(Clock::now() - start, 2s);
  close(filler);
}

// Silence before the challenge, an answer that trickles a byte at a time, and a server that
// takes none of the rank's round each end within their bound (10 s, and the round's 0.2 s +
// 10 s), together. Before, the one that stopped reading held the rank for ever.
TEST(RendezvousClient, SilenceATrickleAndADeafServerEndWithinTheirBounds) {
  const auto start = Clock::now();
  std::atomic<bool> done{false};
  FakeServer silent([&](int) {
    while (!done)
      std::this_thread::sleep_for(10ms);
  });
  auto silence = std::async(std::launch::async, [&] {
    try {
      make_rendezvous_bootstrap(silent.address(), "t0k3n", 0, 2, 1s);
      return std::string("joined");
    } catch (const BootstrapError& e) {
      return std::string(e.what());
    }
  });
  auto trickle = std::async(std::launch::async, [&] {
    return first_round(
        [&](int fd) {
          handshake(fd);
          const std::string answer = u32(0) + u32(2) + u32(1000) + std::string(1000, 'v');
          for (char c : answer) {  // until the rank gives up and closes
            if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) return;
            std::this_thread::sleep_for(100ms);
          }
        },
        200ms);
  });
  auto deaf = std::async(std::launch::async, [&] {
    std::atomic<bool> over{false};
    std::string what = "no error";
    FakeServer server([&](int& fd) {
      give(fd, "DDLRV2" + std::string(16, 'n'));
      read_within(fd, 46, 5s);                // the hello, and nothing more
      const auto until = Clock::now() + 15s;  // then it closes, lest a rank that waits hang
      while (!over && Clock::now() < until)
        std::this_thread::sleep_for(10ms);
      close(std::exchange(fd, -1));  // a reset: what it did not read is dropped
    });
    try {
      auto rank = make_rendezvous_bootstrap(server.address(), "t0k3n", 0, 2, 2s);
      rank->allgather(std::string(64 << 20, 'v'), 200ms);
    } catch (const BootstrapError& e) {
      what = without(e.what(), server.address());
    }
    over = true;
    return what;
  });
  const std::string s = silence.get(), t = trickle.get(), d = deaf.get();
  done = true;
  EXPECT_EQ(s, "rank 0: the rendezvous at " + silent.address() +
                   " sent no whole challenge within 10 s (is ddlrun stopped or overloaded? see "
                   "its output)");
  const std::string late =
      "rank 0: the rendezvous at ADDR did not answer within 10.2 s (is ddlrun stopped or "
      "overloaded? see its output)";
  EXPECT_EQ(t, late);
  EXPECT_EQ(d, late);
  EXPECT_LT(Clock::now() - start, 13s);
}

}  // namespace
}  // namespace ddl::comm
