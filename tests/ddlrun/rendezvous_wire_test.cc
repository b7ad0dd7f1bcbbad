// Per-node mode's rendezvous against strangers, over real loopback sockets: the
// limits before a hello is accepted (message size, field count, connections waiting), linear
// parsing, refusals that quote short and printable and never hold node 0 up, and the secrets:
// proved by challenge and response, the ranks' token derived on each node, neither ever on the
// wire (a recording proxy sits between the nodes and node 0).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <mutex>
#include <thread>

#include "base/digest.h"
#include "ddlrun/per_node/node_wire.h"
#include "ddlrun/per_node/rendezvous.h"
#include "tests/lib/dial.h"
#include "tests/lib/out_of_descriptors.h"
#include "tests/lib/tcp_recorder.h"

namespace ddl::ddlrun {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "s3cret-of-the-job-7f3a9c";

/// Node 0's server on a free port, recording what it reports.
struct Node0 {
  explicit Node0(int nnodes, std::string token = kSecret) {
    NodeServer::Settings s;
    s.token = std::move(token);
    s.nnodes = nnodes;
    s.timeout = 10000ms;
    s.heartbeat_timeout = 3000ms;
    s.job_id = "job7";
    server = std::make_unique<NodeServer>(s, [this](const std::string& line) {
      std::lock_guard lock(mutex);
      reports.push_back(line);
    });
  }
  std::vector<std::string> reported() {
    std::lock_guard lock(mutex);
    return reports;
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(server->port()); }

  std::unique_ptr<NodeServer> server;
  std::mutex mutex;
  std::vector<std::string> reports;
};

std::unique_ptr<NodeClient> join(const std::string& endpoint, int node, int nnodes,
                                 const std::string& token = kSecret) {
  NodeHello h{node, nnodes, "", "host" + std::to_string(node), "inventory"};
  return NodeClient::join(endpoint, token, h, 5000ms);
}

using ddl::testing::dial;

/// The next message on `fd` within `limit`; nullopt at its end or past the limit.
std::optional<wire::Message> next(int fd, wire::Reader& in, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (std::optional<wire::Message> m = in.take()) return m;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0 && !wire::fill(fd, in)) return std::nullopt;
  }
  return std::nullopt;
}

/// Whether node 0 closed `fd` within `limit` (what it sent before is read and dropped).
bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0 && ::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

/// A stranger's connection: node 0's challenge read, its nonce returned.
std::string challenged(int fd) {
  wire::Reader in;
  const std::optional<wire::Message> m = next(fd, in, 2000ms);
  EXPECT_TRUE(m.has_value());
  const std::optional<std::string> nonce = m ? wire::decode_challenge(*m) : std::nullopt;
  EXPECT_TRUE(nonce.has_value());
  return nonce.value_or("");
}

void send_bytes(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

/// A hello (node 1 of 2) answering `nonce` with `secret`'s proof, its fields replaced by `with`.
std::string hello(const std::string& nonce, const std::string& secret,
                  std::vector<std::pair<size_t, std::string>> with = {}) {
  const std::string mine(wire::kNonceSize, 'n');
  std::vector<std::string> f = {
      wire::kMagic, mine, wire::proof(secret, "node", nonce, mine), "1", "2", "", "host1", "", "0"};
  for (auto& [at, value] : with)
    f[at] = value;
  return wire::encode(wire::kHello, f);
}

std::string header(uint32_t count, uint32_t first_length) {
  std::string h(1, static_cast<char>(wire::kHello));
  for (uint32_t v : {count, first_length})
    for (int shift = 24; shift >= 0; shift -= 8)
      h.push_back(static_cast<char>((v >> shift) & 0xff));
  return h;
}

// A number on the wire is 1 to 9 decimal digits and nothing else: no sign, space or overflow.
TEST(RendezvousWire, NumbersAreOneToNineDigits) {
  EXPECT_EQ(wire::to_int("0"), 0);
  EXPECT_EQ(wire::to_int("007"), 7);
  EXPECT_EQ(wire::to_int("999999999"), 999999999);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x1", "1000000000", "-0"})
    EXPECT_EQ(wire::to_int(bad), std::nullopt) << bad;
}

TEST(RendezvousWire, ALengthPrefixOverTheHelloLimitIsRefusedBeforeItsBytes) {
  wire::Reader reader(wire::kMaxHello, wire::kMaxHelloFields);
  reader.add(header(9, 64u << 20));
  try {
    reader.take();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "a message over 256 KiB");
  }
  Node0 n0(2);
  const int fd = dial(n0.server->port());
  challenged(fd);
  send_bytes(fd, header(9, 64u << 20));
  EXPECT_TRUE(closed_within(fd, 2000ms));
  ::close(fd);
  EXPECT_EQ(n0.reported(), std::vector<std::string>{
                               "rendezvous: a node (from 127.0.0.1) sent garbage (a message over "
                               "256 KiB); closed its connection"});
}

TEST(RendezvousWire, TooManyFieldsBeforeTheHelloAreRefused) {
  wire::Reader reader(wire::kMaxHello, wire::kMaxHelloFields);
  reader.add(header(1000, 0));
  try {
    reader.take();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "a message with 1000 fields");
  }
}

TEST(RendezvousWire, ParsingIsLinearInTheBytes) {
  // 64 fields of 1 MB in 64 KiB reads, then 200,000 heartbeats in one read: the old parser
  // re-read every whole field on each read (9.7 s of CPU for the first) and moved the buffer
  // once per message (minutes for the second).
  const auto start = Clock::now();
  wire::Reader big;
  const std::string whole =
      wire::encode(wire::kPlan, std::vector<std::string>(64, std::string(1'000'000, 'x')));
  int got = 0;
  for (size_t at = 0; at < whole.size(); at += 65536) {
    big.add(std::string_view(whole).substr(at, 65536));
    while (big.take())
      ++got;
  }
  EXPECT_EQ(got, 1);
  wire::Reader many;
  std::string beats;
  for (int i = 0; i < 200000; ++i)
    beats += wire::encode(wire::kHeartbeat, {});
  many.add(beats);
  got = 0;
  while (many.take())
    ++got;
  EXPECT_EQ(got, 200000);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(RendezvousWire, ConnectionsWithoutHelloAreCappedOldestFirst) {
  Node0 n0(2);
  std::vector<int> strangers;
  for (int i = 0; i < 40; ++i) {
    strangers.push_back(dial(n0.server->port()));
    challenged(strangers.back());
  }
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(closed_within(strangers[static_cast<size_t>(i)], 2000ms)) << "stranger " << i;
  EXPECT_FALSE(closed_within(strangers.back(), 300ms));
  // The nodes still get in.
  auto one = std::async(std::launch::async, [&] { return join(n0.endpoint(), 1, 2); });
  EXPECT_EQ(join(n0.endpoint(), 0, 2)->welcome().nodes.size(), 2u);
  EXPECT_EQ(one.get()->welcome().nodes.size(), 2u);
  for (int fd : strangers)
    ::close(fd);
  EXPECT_EQ(n0.reported(),
            std::vector<std::string>{
                "rendezvous: more than 32 connections have not said hello; closing the oldest (is "
                "something other than ddlrun connecting to port " +
                std::to_string(n0.server->port()) + "?)"});
}

// A node's connection keeps its place for its grace (200 ms) however many strangers come
// after it: 40 arrive between its challenge and its hello (32 may wait), and it still gets
// its welcome. Before, the oldest waiting connection was closed at once: the node's.
TEST(RendezvousWire, ANodeKeepsItsPlaceForItsGraceDuringAFlood) {
  Node0 n0(2);
  const int node1 = dial(n0.server->port());
  const std::string nonce = challenged(node1);
  std::vector<int> strangers;
  for (int i = 0; i < 40; ++i)
    strangers.push_back(dial(n0.server->port()));
  for (int i = 0; i < 31; ++i)  // the places left beside the node's
    challenged(strangers[static_cast<size_t>(i)]);
  std::this_thread::sleep_for(30ms);  // time for the next to take a place, were there one
  send_bytes(node1, hello(nonce, kSecret));
  auto node0 = std::async(std::launch::async, [&] { return join(n0.endpoint(), 0, 2); });
  wire::Reader in;
  const std::optional<wire::Message> proven = next(node1, in, 5000ms);
  EXPECT_TRUE(proven &&
              wire::node0_proved(*proven, kSecret, std::string(wire::kNonceSize, 'n'), nonce))
      << "node 0 did not prove the secret";
  send_bytes(node1, wire::encode(wire::kInventory, {"inventory"}));
  const std::optional<wire::Message> m = next(node1, in, 5000ms);
  EXPECT_TRUE(m && m->type == wire::kWelcome) << "the flood crowded node 1 out";
  try {
    EXPECT_EQ(node0.get()->welcome().nodes.size(), 2u);
  } catch (const RendezvousError& e) {
    ADD_FAILURE() << e.what();
  }
  ::close(node1);
  for (int fd : strangers)
    ::close(fd);
}

// Out of descriptors (a flood of connections, a low ulimit -n) node 0 leaves its listening
// socket alone for a moment each time instead of spinning on it (a core at 100% for as long
// as no descriptor freed), and takes the queued connection once one frees.
TEST(RendezvousWire, OutOfDescriptorsNode0RestsThenTakesTheConnection) {
  const int status = ddl::testing::in_child([] {
    Node0 n0(2);
    return ddl::testing::listener_out_of_descriptors(n0.server->port());
  });
  EXPECT_EQ(status, 0) << ddl::testing::out_of_descriptors_text(status);
}

TEST(RendezvousWire, ARefusalQuotesAShortPrintablePrefix) {
  Node0 n0(2);
  const int fd = dial(n0.server->port());
  const std::string nonce = challenged(fd);
  const std::string count = "3\n" + std::string(100000, '\x01');
  send_bytes(fd, hello(nonce, kSecret, {{4, count}, {6, "host\x1b[31m"}}));
  wire::Reader in;
  const std::optional<wire::Message> m = next(fd, in, 2000ms);
  ::close(fd);
  ASSERT_TRUE(m.has_value());
  const std::string why =
      "it was given 3\\x0a\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01 "
      "... (100002 bytes) nodes, node 0 2; give every node the same --nnodes";
  EXPECT_EQ(m->fields, std::vector<std::string>{"refused node 1: " + why});
  EXPECT_EQ(n0.reported(), std::vector<std::string>{"rendezvous: refused node 1 (host\\x1b[31m, "
                                                    "from 127.0.0.1): " +
                                                    why});
}

TEST(RendezvousWire, RefusalsToStrangersThatNeverReadDoNotHoldUpTheNodes) {
  Node0 n0(2);
  std::vector<int> strangers;
  for (int i = 0; i < 6; ++i) {
    const int fd = dial(n0.server->port());
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    send_bytes(fd,
               hello(std::string(wire::kNonceSize, 'x'), "guess", {{6, std::string(200000, 'h')}}));
    strangers.push_back(fd);
  }
  const auto start = Clock::now();
  auto one = std::async(std::launch::async, [&] { return join(n0.endpoint(), 1, 2); });
  EXPECT_EQ(join(n0.endpoint(), 0, 2)->welcome().nodes.size(), 2u);
  one.get();
  EXPECT_LT(Clock::now() - start, 2s);
  std::vector<std::string> reports = n0.reported();
  for (int i = 0; i < 250 && reports.size() < 6; ++i) {  // node 0 may still read the last ones
    std::this_thread::sleep_for(20ms);
    reports = n0.reported();
  }
  // Closed only now: a stranger closed with node 0's refusal unread resets the connection,
  // and node 0 may not have read the rest of its hello yet (then it reports no refusal).
  for (int fd : strangers)
    ::close(fd);
  ASSERT_EQ(reports.size(), 6u);
  EXPECT_EQ(reports[0], "rendezvous: refused node 1 (" + std::string(64, 'h') +
                            " ... (200000 bytes), from 127.0.0.1): wrong token; give every node "
                            "the same secret (DDL_JOB_TOKEN or --rdzv-token-file)");
}

TEST(RendezvousWire, Node0ReportsTheFirstTenRefusalsThenSaysItStopped) {
  Node0 n0(2);
  for (int i = 0; i < 12; ++i) {
    const int fd = dial(n0.server->port());
    send_bytes(fd, hello(challenged(fd), "guess"));
    EXPECT_TRUE(closed_within(fd, 2000ms));
    ::close(fd);
  }
  const std::vector<std::string> reports = n0.reported();
  ASSERT_EQ(reports.size(), 11u);
  EXPECT_EQ(reports[9],
            "rendezvous: refused node 1 (host1, from 127.0.0.1): wrong token; give every node the "
            "same secret (DDL_JOB_TOKEN or --rdzv-token-file)");
  EXPECT_EQ(reports[10],
            "rendezvous: more refused connections are not shown (is something other than this "
            "job's ddlrun connecting to port " +
                std::to_string(n0.server->port()) + "?)");
}

TEST(RendezvousWire, AStrangerThatComesOnceTheNodesMetIsRefusedWithItsReason) {
  // The hello of a stranger may be read whole only after the nodes met (a CI run read a sixth
  // 200 KB hello after the two nodes' hellos): it was closed without a word on either side.
  Node0 n0(2);
  auto one = std::async(std::launch::async, [&] { return join(n0.endpoint(), 1, 2); });
  const std::unique_ptr<NodeClient> zero = join(n0.endpoint(), 0, 2);
  const std::unique_ptr<NodeClient> first = one.get();  // kept: a node that leaves ends it all
  const int fd = dial(n0.server->port());
  send_bytes(fd, hello(challenged(fd), "guess"));
  wire::Reader in;
  const std::optional<wire::Message> m = next(fd, in, 2000ms);
  ::close(fd);
  const std::string why =
      "wrong token; give every node the same secret (DDL_JOB_TOKEN or --rdzv-token-file)";
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fields, std::vector<std::string>{"refused node 1: " + why});
  const int other = dial(n0.server->port());
  challenged(other);
  send_bytes(other, wire::encode(wire::kHello, {"not-ddl"}));
  EXPECT_TRUE(closed_within(other, 2000ms));
  ::close(other);
  EXPECT_EQ(n0.reported(),
            (std::vector<std::string>{
                "rendezvous: refused node 1 (host1, from 127.0.0.1): " + why,
                "rendezvous: refused node ? (from 127.0.0.1): it does not speak this rendezvous (" +
                    std::string(wire::kMagic) + "): run the same ddlrun on every node"}));
}

TEST(RendezvousWire, AProofForAnotherChallengeIsAWrongToken) {
  Node0 n0(2);
  const int fd = dial(n0.server->port());
  challenged(fd);
  send_bytes(fd, hello(std::string(wire::kNonceSize, '\0'), kSecret));  // a recorded one
  wire::Reader in;
  const std::optional<wire::Message> m = next(fd, in, 2000ms);
  ::close(fd);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fields,
            std::vector<std::string>{"refused node 1: wrong token; give every node the same secret "
                                     "(DDL_JOB_TOKEN or --rdzv-token-file)"});
}

// A node sends its hardware only once node 0 proved the secret: a stranger listening at node
// 0's address (here one that admits anyone) learns nothing of it.
TEST(RendezvousWire, Node0MustProveTheSecretBeforeANodeSaysMore) {
  Node0 n0(1, "");  // admits anyone, knows no secret
  testing::TcpRecorder link(n0.server->port());
  const std::string endpoint = "127.0.0.1:" + std::to_string(link.port());
  try {
    join(endpoint, 0, 1);
    ADD_FAILURE() << "joined";
  } catch (const RendezvousError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the rendezvous at " + endpoint +
                  ": node 0 did not prove that it knows this job's secret, so this node sent it "
                  "nothing of its own; give every node the same secret (DDL_JOB_TOKEN or "
                  "--rdzv-token-file) and the same ddlrun, and check --rdzv");
  }
  std::this_thread::sleep_for(200ms);
  const std::string seen = link.bytes();
  EXPECT_NE(seen.find(wire::kMagic), std::string::npos) << "the recorder saw nothing";
  EXPECT_EQ(seen.find("inventory"), std::string::npos) << "the node's hardware crossed the wire";
}

TEST(RendezvousWire, NeitherTheSecretNorTheRanksTokenCrossesTheWire) {
  Node0 n0(3);
  testing::TcpRecorder link(n0.server->port());
  const std::string endpoint = "127.0.0.1:" + std::to_string(link.port());
  std::vector<std::future<std::unique_ptr<NodeClient>>> joining;
  for (int k = 0; k < 3; ++k)
    joining.push_back(std::async(std::launch::async, [&, k] { return join(endpoint, k, 3); }));
  std::vector<std::unique_ptr<NodeClient>> nodes;
  for (auto& f : joining)
    nodes.push_back(f.get());
  std::vector<std::future<Ports>> agreeing;
  for (auto& n : nodes)
    agreeing.push_back(std::async(std::launch::async, [&n] { return n->agree("d", {}); }));
  for (auto& f : agreeing)
    f.get();
  const std::string token = nodes[0]->welcome().job_token;
  EXPECT_EQ(token.size(), 64u);
  for (auto& n : nodes)
    EXPECT_EQ(n->welcome().job_token, token);
  std::this_thread::sleep_for(200ms);
  const std::string seen = link.bytes();
  EXPECT_NE(seen.find(wire::kMagic), std::string::npos) << "the recorder saw nothing";
  EXPECT_EQ(seen.find(kSecret), std::string::npos);
  EXPECT_EQ(seen.find(token), std::string::npos);
}

}  // namespace
}  // namespace ddl::ddlrun
