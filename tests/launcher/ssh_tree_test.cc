// The launch tree of the ssh launcher (launcher/ssh/tree.h, relay.h, ssh.cc): its shape, its
// frames and their exact errors, an interior agent's relay driven through the recording ssh
// double (tests/ssh/fake_ssh.h, each child's `ddlrun --agent` played by a script), and ddlrun's
// side over a 3-level tree whose first-level agent plays the hosts below it.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "base/net/codec.h"
#include "launcher/ssh/agent_tree.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/relay.h"
#include "launcher/ssh/ssh.h"
#include "launcher/ssh/tree.h"
#include "tests/launcher/ssh_frames.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

using ddl::ssh::FakeConnector;
using ddl::ssh::FakeRemote;
using ssh::FrameType;
using ssh::TreeHost;
using std::chrono::milliseconds;
using test::chain_job;
using test::events_until;
using test::frames;
using test::hello_frame;

std::vector<std::pair<int, std::string>> hosts(int n) {
  std::vector<std::pair<int, std::string>> out;
  for (int i = 0; i < n; ++i)
    out.emplace_back(i, "n" + std::to_string(i));
  return out;
}

void walk(const std::vector<TreeHost>& level, int width, std::vector<int>& seen) {
  for (const TreeHost& h : level) {
    EXPECT_LE(static_cast<int>(h.children.size()), width) << h.name;
    seen.push_back(h.index);
    walk(h.children, width, seen);
  }
}

TEST(LaunchTree, FanOutFourOn64HostsHasThreeLevelsAndEveryHostOnce) {
  const std::vector<TreeHost> first = ssh::launch_tree(hosts(64), 4);
  ASSERT_EQ(first.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(first[i].index, i);  // the job's order: host 0 logs in from ddlrun
  EXPECT_EQ(ssh::tree_depth(first), 3);
  std::vector<int> seen;
  walk(first, 4, seen);
  std::sort(seen.begin(), seen.end());
  std::vector<int> all(64);
  for (int i = 0; i < 64; ++i)
    all[i] = i;
  EXPECT_EQ(seen, all);
  for (const TreeHost& h : first)
    EXPECT_EQ(ssh::hosts_below(h), 15) << h.name;  // balanced: 60 below, 15 each
}

TEST(LaunchTree, FlatUpToTheWidthOrWithWidthZero) {
  for (const auto& [n, width] : std::vector<std::pair<int, int>>{{4, 4}, {64, 64}, {500, 0}}) {
    const std::vector<TreeHost> first = ssh::launch_tree(hosts(n), width);
    EXPECT_EQ(static_cast<int>(first.size()), n);
    EXPECT_EQ(ssh::tree_depth(first), 1) << n << " hosts, width " << width;
  }
  EXPECT_EQ(ssh::tree_depth(ssh::launch_tree({}, 4)), 0);
}

TEST(LaunchTree, SharesTheRestEvenlyUnderTheFirstLevel) {
  // 128 hosts at PRRTE's radix: 64 first-level agents each start one, not one agent 64.
  const std::vector<TreeHost> first = ssh::launch_tree(hosts(128), 64);
  ASSERT_EQ(first.size(), 64u);
  for (const TreeHost& h : first)
    EXPECT_EQ(h.children.size(), 1u);
  EXPECT_EQ(first[0].children[0].index, 64);
  // A chain at width 1.
  const std::vector<TreeHost> chain = ssh::launch_tree(hosts(3), 1);
  EXPECT_EQ(chain, (std::vector<TreeHost>{{0, "n0", {{1, "n1", {{2, "n2", {}}}}}}}));
}

TEST(LaunchTree, ATreeDeeperThan32LevelsIsRefusedUpFront) {
  // A chain of 33 hosts failed at every launch as a malformed frame.
  EXPECT_EQ(ssh::tree_depth(ssh::launch_tree(hosts(32), 1)), 32);
  try {
    ssh::launch_tree(hosts(40), 1);
    ADD_FAILURE() << "no error";
  } catch (const ssh::TreeTooDeep& e) {
    EXPECT_STREQ(e.what(),
                 "40 hosts at --tree-width 1 make a launch tree 40 levels deep, and it may be at "
                 "most 32: give --tree-width 2 or more");
  }
  EXPECT_EQ(ssh::tree_depth(ssh::launch_tree(hosts(4000), 2)), 11);
}

TEST(SubtreeFrame, RoundTripsWithoutTheKeptSessions) {
  ssh::SubtreeFrame f;
  f.ssh.ssh_config = "/run/x/ssh_config";
  f.ssh.user = "me";
  f.ssh.port = 2222;
  f.ssh.known_hosts = "/k";
  f.ssh.host_key_policy = ddl::ssh::HostKeyPolicy::kAcceptNew;
  f.ssh.connect_timeout = milliseconds(1500);
  f.ssh.command_timeout = milliseconds(9000);
  f.ssh.max_parallel = 7;
  f.ddlrun_path = "/opt/ddlrun";
  f.ddlrun_address = "10.200.0.1";
  f.heartbeat_timeout = milliseconds(4000);
  f.children = ssh::launch_tree(hosts(7), 2);
  const ssh::SubtreeFrame g = ssh::decode_subtree(ssh::encode(f));
  EXPECT_EQ(g.ssh.ssh_config, f.ssh.ssh_config);
  EXPECT_EQ(g.ssh.user, "me");
  EXPECT_EQ(g.ssh.port, 2222);
  EXPECT_EQ(g.ssh.known_hosts, "/k");
  EXPECT_EQ(g.ssh.host_key_policy, ddl::ssh::HostKeyPolicy::kAcceptNew);
  EXPECT_EQ(g.ssh.connect_timeout, milliseconds(1500));
  EXPECT_EQ(g.ssh.command_timeout, milliseconds(9000));
  EXPECT_EQ(g.ssh.max_parallel, 7);
  EXPECT_EQ(g.ddlrun_path, "/opt/ddlrun");
  EXPECT_EQ(g.ddlrun_address, "10.200.0.1");
  EXPECT_EQ(g.heartbeat_timeout, milliseconds(4000));
  EXPECT_EQ(g.children, f.children);
}

std::string decode_error(const std::string& payload) {
  try {
    ssh::decode_subtree(payload);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "decoded";
}

TEST(SubtreeFrame, MalformedOnesAreNamed) {
  ssh::SubtreeFrame f;
  f.children = ssh::launch_tree(hosts(3), 1);
  const std::string good = ssh::encode(f);
  EXPECT_EQ(decode_error(good.substr(0, 10)), "malformed subtree frame: truncated");
  EXPECT_EQ(decode_error(good.substr(0, good.size() - 3)),
            "malformed subtree frame: a count of 1 exceeds the data");
  EXPECT_EQ(decode_error(good + "x"), "malformed subtree frame: trailing bytes");
  f.children = {};  // a chain 40 deep, as launch_tree no longer makes one
  for (int i = 39; i >= 0; --i) {
    f.children = {{i, "n" + std::to_string(i), std::move(f.children)}};
  }
  EXPECT_EQ(decode_error(ssh::encode(f)), "malformed subtree frame: deeper than 32 levels");
  f.children = {{-3, "x", {}}};
  EXPECT_EQ(decode_error(ssh::encode(f)), "malformed subtree frame: a negative host index");
}

TEST(TreeFrames, RoutedFramesNestAndTheTreeTypesAreKnown) {
  const std::string inner =
      ssh::encode_frame(FrameType::kStdout, 3, "hi\n") + ssh::encode_frame(FrameType::kDone, 0, {});
  ssh::FrameReader reader;
  reader.feed(ssh::route(12, inner) + ssh::encode_frame(FrameType::kLost, 9, "why") +
              ssh::encode_frame(FrameType::kSubtree, 0, "w"));
  const std::optional<ssh::Frame> t = reader.next();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->type, FrameType::kRouted);
  EXPECT_EQ(t->id, 12);
  EXPECT_EQ(t->payload, inner);
  EXPECT_EQ(reader.next()->type, FrameType::kLost);
  EXPECT_EQ(reader.next()->type, FrameType::kSubtree);
  // Their type bytes begin no text: a login script's output is still not taken for frames.
  for (const char* banner : {"Welcome to n1\n", "This system is private\n", "Last login\n"}) {
    ssh::FrameReader r;
    r.feed(banner);
    EXPECT_THROW(r.next(), std::runtime_error) << banner;
  }
}

TEST(TreeTexts, ALostHostNamesWhatGoesWithIt) {
  EXPECT_EQ(ssh::tree_lost_text("no heartbeat for 4 s (x)", 15),
            "no heartbeat for 4 s (x); the 15 hosts below it in the launch tree are lost with it");
  EXPECT_EQ(ssh::tree_lost_text("gone", 1),
            "gone; the 1 host below it in the launch tree is lost with it");
  EXPECT_EQ(ssh::tree_lost_text("gone", 0), "gone");
  EXPECT_EQ(ssh::lost_with_parent_text("node3"), "lost with its tree parent node3");
}

// --- the relay -----------------------------------------------------------------------------

/// What the relay passed up, waited for.
class Upstream {
 public:
  ssh::Relay::Up sink() {
    return [this](std::string_view b) {
      std::lock_guard lock(mutex_);
      bytes_.append(b);
      return true;
    };
  }
  /// Waits (`limit` at most) until `pred(frames so far)`.
  template <typename Pred>
  std::vector<ssh::Frame> await(Pred pred, milliseconds limit = milliseconds(3000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      std::vector<ssh::Frame> got;
      {
        std::lock_guard lock(mutex_);
        got = frames(bytes_);
      }
      if (pred(got) || std::chrono::steady_clock::now() > deadline) return got;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

 private:
  std::mutex mutex_;
  std::string bytes_;
};

bool has(const std::vector<ssh::Frame>& got, FrameType type, int id) {
  return std::any_of(got.begin(), got.end(),
                     [&](const ssh::Frame& f) { return f.type == type && f.id == id; });
}
const ssh::Frame* find(const std::vector<ssh::Frame>& got, FrameType type, int id) {
  for (const ssh::Frame& f : got) {
    if (f.type == type && f.id == id) return &f;
  }
  return nullptr;
}

/// Why host `id` was lost (its L frame's payload in `got`), or "(not lost)".
std::string lost_text(const std::vector<ssh::Frame>& got, int id) {
  const ssh::Frame* f = find(got, FrameType::kLost, id);
  return f != nullptr ? f->payload : "(not lost)";
}
/// What a relay over relay_spec()'s c1 and c2, passing up to `up`, passed up until both were
/// lost (3 s at most).
std::vector<ssh::Frame> until_both_lost(Upstream& up) {
  return up.await(
      [](auto& g) { return has(g, FrameType::kLost, 1) && has(g, FrameType::kLost, 2); });
}

ssh::SubtreeFrame relay_spec() {
  ssh::SubtreeFrame spec;
  spec.ddlrun_path = "/opt/ddlrun";
  spec.ddlrun_address = "10.200.0.1";
  spec.heartbeat_timeout = milliseconds(400);
  spec.children = {{1, "c1", {{3, "c3", {}}}}, {2, "c2", {}}};
  return spec;
}

TEST(Relay, StartsEachChildsAgentAndRoutesBothWays) {
  FakeConnector connector;
  std::shared_ptr<FakeRemote> c1;
  connector.host("c1").program = [&](FakeRemote& r) {
    r.print(hello_frame("c1") + ssh::encode_frame(FrameType::kHeartbeat, 0, {}) +
            ssh::route(3, hello_frame("c3")));
  };
  connector.host("c2").refuse = "connection refused (10.0.0.2:22)";
  Upstream up;
  ssh::Relay relay(relay_spec(), "c0", up.sink(), connector);
  relay.start();
  std::vector<ssh::Frame> got = up.await([](auto& g) { return g.size() >= 3; });
  // c1's own hello wrapped as from host 1, c3's passed on as it came, c1's heartbeat kept here.
  ASSERT_NE(find(got, FrameType::kRouted, 1), nullptr);
  EXPECT_EQ(frames(find(got, FrameType::kRouted, 1)->payload)[0].type, FrameType::kHello);
  ASSERT_NE(find(got, FrameType::kRouted, 3), nullptr);
  EXPECT_EQ(frames(find(got, FrameType::kRouted, 3)->payload)[0].type, FrameType::kHello);
  // c2 could not be logged in to: its failure, as from it, naming where the login came from.
  ASSERT_NE(find(got, FrameType::kRouted, 2), nullptr);
  const std::vector<ssh::Frame> c2 = frames(find(got, FrameType::kRouted, 2)->payload);
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].type, FrameType::kFailure);
  EXPECT_EQ(c2[0].payload,
            "connection refused (10.0.0.2:22) (from c0, its parent in the launch tree)");

  // Down: host 1's frames unwrapped, host 3's still routed, through c1; host 7 is not below.
  EXPECT_TRUE(relay.down(1, ssh::encode_frame(FrameType::kGo, 0, {})));
  EXPECT_TRUE(relay.down(3, ssh::encode_frame(FrameType::kGo, 0, {})));
  EXPECT_FALSE(relay.down(7, ssh::encode_frame(FrameType::kGo, 0, {})));
  std::this_thread::sleep_for(milliseconds(200));
  c1 = connector.host("c1").remotes.at(0);
  EXPECT_EQ(c1->command(), "/opt/ddlrun --agent");
  const std::vector<ssh::Frame> written = frames(c1->written());
  ASSERT_EQ(written.size(), 3u);
  ASSERT_EQ(written[0].type, FrameType::kSubtree);  // its own subtree first
  const ssh::SubtreeFrame w = ssh::decode_subtree(written[0].payload);
  EXPECT_EQ(w.children, (std::vector<TreeHost>{{3, "c3", {}}}));
  EXPECT_EQ(w.ddlrun_address, "10.200.0.1");
  EXPECT_EQ(written[1].type, FrameType::kGo);
  EXPECT_EQ(written[2].type, FrameType::kRouted);
  EXPECT_EQ(written[2].id, 3);
  c1->print(ssh::encode_frame(FrameType::kDone, 0, {}));
  c1->end(0);
  relay.wait();  // both children's conversations ended
  got = up.await([](auto&) { return false; }, milliseconds(100));
  EXPECT_FALSE(has(got, FrameType::kLost, 1));  // c1 said done before its channel closed
}

TEST(Relay, ASilentChildAndAClosedOneAreLost) {
  FakeConnector connector;
  connector.host("c1").program = [](FakeRemote& r) { r.print(hello_frame("c1")); };
  connector.host("c2").program = [](FakeRemote& r) {
    r.print(hello_frame("c2"));
    r.print("ddlrun agent on c2: got SIGTERM; stopping its ranks\n", ddl::ssh::Stream::kStderr);
    r.end(-1);
  };
  Upstream up;
  ssh::Relay relay(relay_spec(), "c0", up.sink(), connector);
  relay.start();
  const std::vector<ssh::Frame> got = until_both_lost(up);
  EXPECT_EQ(lost_text(got, 1),
            "no heartbeat for 0.4 s (the host is unreachable, or its agent is stopped or hung)");
  EXPECT_EQ(lost_text(got, 2),
            "the connection to its agent closed (from c0, its parent in the launch tree)");
  // The closed child's last words went up as a note of host 2.
  bool note = false;
  for (const ssh::Frame& f : got) {
    if (f.type != FrameType::kRouted || f.id != 2) continue;
    for (const ssh::Frame& g : frames(f.payload)) {
      note = note || (g.type == FrameType::kStderr && g.id == -1 &&
                      g.payload == "c2: ddlrun agent on c2: got SIGTERM; stopping its ranks\n");
    }
  }
  EXPECT_TRUE(note);
  relay.wait();
  EXPECT_TRUE(connector.host("c1").stopped_blocking);
}

// The relay's own "took no data" rule, the head's for the first level. Both children
// beat (never silent). c1's socket takes nothing (its host cut off without a RST): it is lost
// within the heartbeat deadline in the head's words, from this relay's host, its session
// closed without waiting. c2's link is slow (48 KiB/s: a 64 KiB write drains in 1.3 s, three
// times the 0.4 s deadline) but its bytes move: it is not lost, and its 96 KiB arrive whole.
TEST(Relay, AChildThatTakesNoDataIsLostButOneBehindASlowLinkIsNot) {
  FakeConnector connector;
  connector.host("c1").program = [](FakeRemote& r) {
    r.print(hello_frame("c1"));
    r.jam(milliseconds(0));
  };
  connector.host("c2").program = [](FakeRemote& r) {
    r.print(hello_frame("c2"));
    r.throttle(48 << 10);
  };
  Upstream up;
  ssh::Relay relay(relay_spec(), "c0", up.sink(), connector);
  relay.start();
  up.await([](auto& g) { return has(g, FrameType::kRouted, 1) && has(g, FrameType::kRouted, 2); });
  std::vector<std::shared_ptr<FakeRemote>> remotes;  // both ran their agent: hello came up
  for (const char* h : {"c1", "c2"})
    remotes.push_back(connector.host(h).remotes.at(0));
  std::atomic<bool> done{false};
  std::thread beats([&] {
    while (!done) {
      for (auto& r : remotes)
        r->print(ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  const std::string bytes = ssh::encode_frame(FrameType::kStdin, 0, std::string(96 << 10, 'x'));
  EXPECT_TRUE(relay.down(2, bytes));
  const std::vector<ssh::Frame> got =
      up.await([](auto& g) { return has(g, FrameType::kLost, 1); }, milliseconds(3000));
  const bool arrived = [&] {
    for (int i = 0; i < 400; ++i) {
      if (remotes[1]->written().find(bytes) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }();
  const std::vector<ssh::Frame> after = up.await([](auto&) { return false; }, milliseconds(100));
  done = true;
  beats.join();
  ASSERT_NE(find(got, FrameType::kLost, 1), nullptr);
  EXPECT_TRUE(std::regex_match(
      find(got, FrameType::kLost, 1)->payload,
      std::regex(
          R"(took no data for 0\.4 s \([0-9]+ bytes wait for it: the host is unreachable, )"
          R"(or its agent is stopped or hung\) \(from c0, its parent in the launch tree\))")))
      << find(got, FrameType::kLost, 1)->payload;
  EXPECT_TRUE(connector.host("c1").stopped_blocking);
  EXPECT_TRUE(arrived);
  EXPECT_FALSE(has(after, FrameType::kLost, 2));
}

// A child that speaks for a host not below it (its sibling c2) or for itself as routed is a
// protocol error, reported as its loss; nothing it forged goes up.
TEST(Relay, AChildSpeakingForAHostNotBelowItIsLost) {
  FakeConnector connector;
  connector.host("c1").program = [](FakeRemote& r) {
    r.print(hello_frame("c1"));
    r.print(ssh::route(2, ssh::encode_frame(FrameType::kDone, 0, {})));
  };
  connector.host("c2").program = [](FakeRemote& r) {
    r.print(hello_frame("c2"));
    r.print(ssh::encode_frame(FrameType::kLost, 2, "forged"));
  };
  Upstream up;
  ssh::Relay relay(relay_spec(), "c0", up.sink(), connector);
  relay.start();
  const std::vector<ssh::Frame> got = until_both_lost(up);
  EXPECT_EQ(lost_text(got, 1),
            "protocol error: a frame for host 2, which is not below c1 in the launch tree");
  EXPECT_EQ(lost_text(got, 2),
            "protocol error: a frame for host 2, which is not below c2 in the launch tree");
  for (const ssh::Frame& f : got) {
    if (f.type != FrameType::kRouted) continue;
    for (const ssh::Frame& g : frames(f.payload))
      EXPECT_NE(g.type, FrameType::kDone) << "host " << f.id;
  }
  relay.wait();
}

// --- ddlrun over a 3-level tree --------------------------------------------------------------

std::string exit_frame(int rank, int code, int signal = 0) {
  std::string status;
  base::net::put_u32(status, static_cast<uint32_t>(code));
  base::net::put_u32(status, static_cast<uint32_t>(signal));
  return ssh::encode_frame(FrameType::kExit, rank, status);
}

/// Plays n1's agent and, as its relay would, the agents of n2 and n3 below it: each host says
/// hello, ready to its job, and on go prints, exits 0 and says done; `lose_n2` instead reports
/// n2 lost (L) on n2's go.
struct TreeAgent {
  bool lose_n2 = false;
  bool cut_n2 = false;  ///< n2's frames come routed with the last one cut short
  void operator()(FakeRemote& r) const {
    r.print(hello_frame("n1"));
    auto reader = std::make_shared<ssh::FrameReader>();
    auto left = std::make_shared<int>(3);
    r.on_write([self = *this, reader, left](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == FrameType::kSubtree) {
          r.print(ssh::route(1, hello_frame("n2")) + ssh::route(2, hello_frame("n3")));
        }
        if (f->type != FrameType::kRouted) {
          self.on(r, 0, *f, *left);
          continue;
        }
        ssh::FrameReader inner;
        inner.feed(f->payload);
        while (auto g = inner.next())
          self.on(r, f->id, *g, *left);
      }
    });
  }
  void on(FakeRemote& r, int host, const ssh::Frame& f, int& left) const {
    const auto as = [&](const std::string& frames) {
      r.print(host == 0 ? frames : ssh::route(host, frames));
    };
    if (f.type == FrameType::kJob) as(ssh::encode_frame(FrameType::kReady, 0, {}));
    if (f.type != FrameType::kGo) return;
    if (lose_n2 && host == 1) {
      return r.print(ssh::encode_frame(FrameType::kLost, 1, "no heartbeat for 10 s (x)"));
    }
    if (lose_n2 && host == 2) return;  // below the lost n2: nothing comes from it
    if (cut_n2 && host == 1) {
      const std::string out = ssh::encode_frame(FrameType::kStdout, 1, "rank 1\n");
      return r.print(ssh::route(1, out + out.substr(0, out.size() - 1)));
    }
    as(ssh::encode_frame(FrameType::kStdout, host, "rank " + std::to_string(host) + "\n") +
       exit_frame(host, 0) + ssh::encode_frame(FrameType::kDone, 0, {}));
    if (--left == 0) r.end(0);
  }
};

LaunchOptions tree_options() {
  LaunchOptions o;
  o.ddlrun_path = "/opt/ddlrun";
  o.ssh.connect_timeout = milliseconds(1000);
  o.ssh.command_timeout = milliseconds(3000);
  o.ssh.ssh_config = "/etc/cfg";
  o.tree_width = 1;
  return o;
}

TEST(SshBackendTree, LogsInToTheFirstLevelOnlyAndRunsEveryHostThroughIt) {
  FakeConnector connector;
  connector.host("n1").program = TreeAgent{};
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), tree_options(), connector);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  std::multiset<std::string> output;
  for (const Event& e : events_until(events, 3)) {
    if (e.type == Event::Type::kOutput) output.insert(std::to_string(e.host) + " " + e.data);
    if (e.type == Event::Type::kExit) {
      EXPECT_EQ(e.status, ExitStatus{});
    }
    EXPECT_NE(e.type, Event::Type::kHostFailure) << e.data;
  }
  EXPECT_EQ(output, (std::multiset<std::string>{"0 rank 0\n", "1 rank 1\n", "2 rank 2\n"}));
  backend->finish();
  EXPECT_EQ(connector.connected(), std::vector<std::string>{"n1"});
  const std::vector<ssh::Frame> written = frames(connector.host("n1").remotes.at(0)->written());
  ASSERT_FALSE(written.empty());
  ASSERT_EQ(written[0].type, FrameType::kSubtree);
  const ssh::SubtreeFrame w = ssh::decode_subtree(written[0].payload);
  EXPECT_EQ(w.children, (std::vector<TreeHost>{{1, "n2", {{2, "n3", {}}}}}));
  EXPECT_EQ(w.ssh.ssh_config, "/etc/cfg");
  EXPECT_EQ(w.ddlrun_path, "/opt/ddlrun");
  // The job's token travels in the job frames, routed; never in the subtree frame.
  EXPECT_EQ(written[0].payload.find("abc"), std::string::npos);
  int jobs = 0;
  for (const ssh::Frame& f : written) {
    if (f.type == FrameType::kRouted) {
      for (const ssh::Frame& g : frames(f.payload))
        jobs += g.type == FrameType::kJob && g.id == f.id ? 1 : 0;
    }
  }
  EXPECT_EQ(jobs, 2);  // n2's and n3's
}

TEST(SshBackendTree, ALostInteriorHostIsNamedAndTakesItsSubtree) {
  FakeConnector connector;
  connector.host("n1").program = TreeAgent{true};
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), tree_options(), connector);
  backend->start(events);
  std::vector<Event> failures;
  std::vector<Event> exits;
  for (Event& e : events_until(events, 3)) {
    if (e.type == Event::Type::kHostFailure) failures.push_back(e);
    if (e.type == Event::Type::kExit) exits.push_back(e);
  }
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].host, 1);
  EXPECT_EQ(failures[0].data,
            "no heartbeat for 10 s (x); the 1 host below it in the launch tree is lost with it");
  EXPECT_FALSE(failures[0].with_parent);
  // n3 (its agent lost its parent) after n2, as lost with it: not a lost host of its own.
  EXPECT_EQ(failures[1].host, 2);
  EXPECT_EQ(failures[1].data, "lost with its tree parent n2");
  EXPECT_TRUE(failures[1].with_parent);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].rank, 0);
  backend->finish();
}

// A routed frame whose payload ends inside a frame is a protocol error of the first level's
// conversation, not output cut short without a word.
TEST(SshBackendTree, ARoutedFrameEndingInsideAFrameIsAProtocolError) {
  FakeConnector connector;
  TreeAgent agent;
  agent.cut_n2 = true;
  connector.host("n1").program = agent;
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), tree_options(), connector);
  backend->start(events);
  std::vector<Event> failures;
  for (Event& e : events_until(events, 3)) {
    if (e.type == Event::Type::kHostFailure) failures.push_back(e);
  }
  ASSERT_FALSE(failures.empty());
  EXPECT_NE(failures[0].data.find("protocol error: a routed frame ends inside a frame"),
            std::string::npos)
      << failures[0].data;
  backend->finish();
}

/// n1's session as ddlrun's probe keeps it, its agent running (`ddlrun --probe-agent`).
ssh::AgentTree::Kept probe_session(FakeConnector& connector, const LaunchOptions& o) {
  ssh::AgentTree::Kept kept;
  kept.session = connector.connect("n1", o.ssh);
  kept.channel = kept.session->exec("/opt/ddlrun --probe-agent");
  kept.command = "/opt/ddlrun --probe-agent";
  return kept;
}

/// What `bytes` sent to n1 carry: how many subtree frames, and each routed job frame's host
/// index by the id in the tree it went to.
int subtree_frames(const std::string& bytes) {
  int n = 0;
  for (const ssh::Frame& f : frames(bytes))
    n += f.type == FrameType::kSubtree ? 1 : 0;
  return n;
}
std::map<int, int> routed_jobs(const std::string& bytes) {
  std::map<int, int> jobs;
  for (const ssh::Frame& f : frames(bytes)) {
    if (f.type != FrameType::kRouted) continue;
    for (const ssh::Frame& g : frames(f.payload))
      if (g.type == FrameType::kJob) jobs[f.id] = g.id;
  }
  return jobs;
}

/// ddlrun's agents as its probe leaves them when it went down the tree: n1's agent running,
/// the subtree `children` started through it (start_subtree), and the tree they were started
/// along.
std::shared_ptr<ssh::AgentTree> probed_tree(FakeConnector& connector, const LaunchOptions& o,
                                            std::vector<TreeHost> children) {
  ssh::AgentTree::Kept kept = probe_session(connector, o);
  const ssh::SubtreeFrame w =
      ssh::subtree_frame(o.ssh, o.ddlrun_path, o.heartbeat_timeout, children);
  EXPECT_TRUE(ssh::start_subtree(kept, "n1", w, milliseconds(1000)).empty());
  auto agents = std::make_shared<ssh::AgentTree>();
  agents->put("n1", std::move(kept));
  agents->set_tree({{0, "n1", std::move(children)}});
  return agents;
}

// The launch takes the agents' tree over as it is, whatever shape --tree-width would give the
// job's hosts: no second login, no second subtree frame.
TEST(SshBackendTree, TakesTheAgentsTreeOverAsItIs) {
  for (const bool chain : {true, false}) {
    SCOPED_TRACE(chain ? "a chain" : "side by side");
    FakeConnector connector;
    connector.host("n1").program = TreeAgent{};
    LaunchOptions o = tree_options();
    o.agents = probed_tree(connector, o,
                           chain ? std::vector<TreeHost>{{1, "n2", {{2, "n3", {}}}}}
                                 : std::vector<TreeHost>{{1, "n2", {}}, {2, "n3", {}}});
    EventQueue events;
    const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), o, connector);
    EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
    for (const Event& e : events_until(events, 3))
      EXPECT_NE(e.type, Event::Type::kHostFailure) << e.data;
    backend->finish();
    EXPECT_EQ(connector.host("n1").logins, 1);
    EXPECT_EQ(subtree_frames(connector.host("n1").remotes.front()->written()), 1);
  }
}

TEST(LaunchTree, NamesListEveryHostAndInTreeFindsOneAtAnyLevel) {
  const std::vector<TreeHost> tree = {{0, "a", {{2, "c", {{4, "e", {}}}}, {3, "d", {}, "probe"}}},
                                      {1, "b", {}}};
  EXPECT_EQ(ssh::tree_names(tree), (std::vector<std::string>{"a", "c", "e", "d", "b"}));
  EXPECT_TRUE(ssh::in_tree(tree, "e"));
  EXPECT_TRUE(ssh::in_tree(tree, "b"));
  EXPECT_FALSE(ssh::in_tree(tree, "f"));
}

/// Plays n1's agent after ddlrun's probe went down the tree (a restart's): the probe's
/// subtree frame started every host below it but `failed`, which failed to log in (F). Each
/// host below says hello as from its id in that frame, answers ready to its job and, on go,
/// its rank (the job frame's host index, as in chain_job) exits 0.
struct ProbedTreeAgent {
  std::string failed;
  void operator()(FakeRemote& r) const {
    r.print(hello_frame("n1"));
    auto reader = std::make_shared<ssh::FrameReader>();
    auto rank_of = std::make_shared<std::map<int, int>>();  // by route: the job's host index
    r.on_write([failed = failed, reader, rank_of](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      std::string up;
      while (auto f = reader->next()) {
        if (f->type == FrameType::kSubtree) {
          for (const TreeHost& h : ssh::decode_subtree(f->payload).children) {
            // The failed host speaks once more after its failure, as one whose probe printed
            // what ddlrun could not read would: the launch has no place for it, and ignores it.
            up += ssh::route(h.index, h.name == failed
                                          ? ssh::encode_frame(FrameType::kFailure, 1, "refused") +
                                                hello_frame(h.name)
                                          : hello_frame(h.name));
            for (const TreeHost& g : h.children)
              up += ssh::route(g.index, hello_frame(g.name));
          }
        } else if (f->type == FrameType::kRouted) {
          for (const ssh::Frame& g : frames(f->payload)) {
            if (g.type == FrameType::kInventory) continue;  // nX's: it failed, and says no more
            if (g.type == FrameType::kJob) (*rank_of)[f->id] = g.id;
            up += ssh::route(f->id, answer(rank_of->at(f->id), g));
          }
        } else {
          up += answer(0, *f);
        }
      }
      if (!up.empty()) r.print(up);
    });
  }
  static std::string answer(int rank, const ssh::Frame& f) {
    if (f.type == FrameType::kJob) return ssh::encode_frame(FrameType::kReady, 0, {});
    if (f.type != FrameType::kGo) return "";
    return exit_frame(rank, 0) + ssh::encode_frame(FrameType::kDone, 0, {});
  }
};

// A restart whose probe went down the tree and left a host out (nX, which failed, so it has no
// ranks): the job's hosts are numbered again (n2 is 1, n3 2), but the agents below n1 know them
// by the probe's ids (2, 3). The launch takes the agents' tree over with those ids: one login,
// no second subtree frame, nX gets no job and what it still says is passed by, every rank runs,
// and each host's job frame travels to its probe id carrying its index in the job.
TEST(SshBackendTree, ARestartTakesOverTheProbesTreeAndGivesAFailedHostNoJob) {
  FakeConnector connector;
  connector.host("n1").program = ProbedTreeAgent{"nX"};
  LaunchOptions o = tree_options();
  const std::vector<TreeHost> probed = {{1, "nX", {}, "/opt/ddlrun --probe-agent"},
                                        {2, "n2", {{3, "n3", {}}}}};
  ssh::AgentTree::Kept kept = probe_session(connector, o);
  const std::vector<ssh::StartedHost> started = ssh::start_subtree(
      kept, "n1", ssh::subtree_frame(o.ssh, o.ddlrun_path, o.heartbeat_timeout, probed),
      milliseconds(1000));
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].error, "refused");
  o.agents = std::make_shared<ssh::AgentTree>();
  o.agents->put("n1", std::move(kept));
  o.agents->set_tree({{0, "n1", probed}});
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), o, connector);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1, 2}));
  for (const Event& e : events_until(events, 3))
    EXPECT_NE(e.type, Event::Type::kHostFailure) << e.data;
  backend->finish();
  EXPECT_EQ(connector.host("n1").logins, 1);
  const std::string written = connector.host("n1").remotes.back()->written();
  EXPECT_EQ(subtree_frames(written), 1);  // the probe's
  const std::map<int, int> jobs = routed_jobs(written);
  EXPECT_EQ(jobs, (std::map<int, int>{{2, 1}, {3, 2}}));
}

/// The chain job without n2's rank: n1 (index 0) and n3 (index 1), a rank each.
Job job_without_n2() {
  Job job = chain_job();
  comm::Topology& t = job.topology;
  t.hosts = {{0, "n1", "10.0.0.1", {}}, {1, "n3", "10.0.0.3", {}}};
  t.ranks.resize(2);
  t.mode = comm::parse_mode("p:1x2");
  t.rings = comm::default_rings({1, 2});
  return job;
}

// A host of the agents' tree that the plan gave no ranks (n2, between n1 and n3) relays and
// gets no job: the launch neither waits for its hello nor counts it, and the job runs.
TEST(SshBackendTree, AHostWithoutRanksOnlyRelays) {
  FakeConnector connector;
  connector.host("n1").program = ProbedTreeAgent{};
  LaunchOptions o = tree_options();
  o.agents = std::make_shared<ssh::AgentTree>();
  o.agents->set_tree({{0, "n1", {{1, "n2", {{2, "n3", {}}}}}}});
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(job_without_n2(), o, connector);
  EXPECT_EQ(backend->start(events), (std::vector<int>{0, 1}));
  for (const Event& e : events_until(events, 2))
    EXPECT_NE(e.type, Event::Type::kHostFailure) << e.data;
  backend->finish();
  EXPECT_EQ(connector.connected(), std::vector<std::string>{"n1"});
  EXPECT_EQ(routed_jobs(connector.host("n1").remotes.back()->written()),
            (std::map<int, int>{{2, 1}}));
}

// That host lost before the job started is the launch's failure, named with the host below it
// that it takes along, and counted among none of the hosts with ranks: "1 of 2 hosts".
TEST(SshBackendTree, AHostWithoutRanksLostWithRanksBelowItFailsTheStart) {
  FakeConnector connector;
  connector.host("n1").program = [](FakeRemote& r) {
    r.print(hello_frame("n1"));
    r.on_write(
        [reader = std::make_shared<ssh::FrameReader>()](FakeRemote& r, std::string_view bytes) {
          reader->feed(bytes);
          while (auto f = reader->next()) {
            if (f->type == FrameType::kSubtree)
              r.print(ssh::encode_frame(FrameType::kLost, 1, "no heartbeat for 10 s (x)"));
          }
        });
  };
  LaunchOptions o = tree_options();
  o.agents = std::make_shared<ssh::AgentTree>();
  o.agents->set_tree({{0, "n1", {{1, "n2", {{2, "n3", {}}}}}}});
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(job_without_n2(), o, connector);
  std::string error;
  try {
    backend->start(events);
  } catch (const LaunchError& e) {
    error = e.what();
  }
  EXPECT_EQ(error,
            "cannot start the job on 1 of 2 hosts:\n"
            "  n2: no heartbeat for 10 s (x); the 1 host below it in the launch tree is lost "
            "with it\n"
            "fix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or leave "
            "them out of the host list");
}

/// `n` hosts n0, n1, ... (indices 0, 1, ...), a rank each.
Job wide_job(int n) {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "job-wide";
  for (int h = 0; h < n; ++h) {
    t.hosts.push_back({h,
                       "n" + std::to_string(h),
                       "10.1." + std::to_string(h / 250) + "." + std::to_string(h % 250 + 1),
                       {}});
    t.ranks.push_back({h, 0, h, -1, "", "", comm::CpuSet(), "", ""});
  }
  t.mode = comm::parse_mode("p:1x" + std::to_string(n));
  t.rings = comm::default_rings({1, n});
  job.argv = {"train"};
  job.token = "abc";
  return job;
}

/// Plays a first-level agent and, as the relays below it would, every host of its subtree:
/// each says hello (those below once the subtree frame came), ready to its job, and on go its
/// rank (rank = host index) exits 0 and it says done.
struct SubtreeAgent {
  void operator()(FakeRemote& r) const {
    r.print(hello_frame("first"));
    auto reader = std::make_shared<ssh::FrameReader>();
    auto own = std::make_shared<int>(-1);
    r.on_write([reader, own](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      std::string up;
      while (auto f = reader->next()) {
        if (f->type == FrameType::kSubtree) {
          hellos(ssh::decode_subtree(f->payload).children, up);
        } else if (f->type == FrameType::kRouted) {
          ssh::FrameReader inner;
          inner.feed(f->payload);
          while (auto g = inner.next())
            up += ssh::route(f->id, answer(f->id, *g));
        } else {
          if (f->type == FrameType::kJob) *own = f->id;
          up += answer(*own, *f);
        }
      }
      if (!up.empty()) r.print(up);
    });
  }
  static void hellos(const std::vector<TreeHost>& level, std::string& up) {
    for (const TreeHost& h : level) {
      up += ssh::route(h.index, hello_frame(h.name));
      hellos(h.children, up);
    }
  }
  static std::string answer(int host, const ssh::Frame& f) {
    if (f.type == FrameType::kJob) return ssh::encode_frame(FrameType::kReady, 0, {});
    if (f.type != FrameType::kGo) return "";
    return exit_frame(host, 0) + ssh::encode_frame(FrameType::kDone, 0, {});
  }
};

/// This process's threads (/proc/self/status).
int threads_now() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

/// The exits `events` brings within a minute, up to `n`; a host failure fails the test and ends
/// the wait.
int exits_within_a_minute(EventQueue& events, int n) {
  int exits = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (exits < n) {
    std::optional<Event> e = events.pop(deadline);
    if (!e) break;
    EXPECT_NE(e->type, Event::Type::kHostFailure) << e->data;
    if (e->type == Event::Type::kHostFailure) break;
    exits += e->type == Event::Type::kExit ? 1 : 0;
  }
  return exits;
}

// At the default width (50, Slurm's TreeWidth) ddlrun's side of the launch
// holds a session per first-level host only (its threads are a fixed pool, below), so its
// threads stay under 64 at any host count: run at 128 and 1,024 hosts; at Summit's 4,608 the
// first level is as wide.
TEST(SshBackendTree, DefaultWidthKeepsTheThreadsUnder64AtAnyHostCount) {
  std::vector<std::pair<int, std::string>> summit;
  for (int h = 0; h < 4608; ++h)
    summit.emplace_back(h, "n" + std::to_string(h));
  EXPECT_EQ(ssh::launch_tree(summit, LaunchOptions{}.tree_width).size(), 50u);
  for (const int n : {128, 1024}) {
    FakeConnector connector;
    for (int h = 0; h < n; ++h)
      connector.host("n" + std::to_string(h)).program = SubtreeAgent{};
    LaunchOptions o;
    o.ddlrun_path = "/opt/ddlrun";
    o.heartbeat_timeout = std::chrono::seconds(60);  // the agents played here send none
    ASSERT_EQ(o.tree_width, 50);
    EventQueue events;
    const std::unique_ptr<Backend> backend = make_ssh_backend(wide_job(n), o, connector);
    ASSERT_EQ(backend->start(events).size(), static_cast<size_t>(n));
    const int threads = threads_now();
    const int exits = exits_within_a_minute(events, n);
    backend->finish();
    EXPECT_EQ(exits, n);
    EXPECT_LT(threads, 64) << n << " hosts";
    EXPECT_EQ(connector.connected().size(), 50u) << n << " hosts";
  }
}

/// The most threads this process had while `during` ran (sampled every millisecond).
template <typename Fn>
int peak_threads(Fn during) {
  std::atomic<int> peak{threads_now()};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), threads_now());
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  during();
  done = true;
  sampler.join();
  return peak;
}

// Flat: with --tree-width 0 ddlrun logs in to every host itself (a session
// each), but its conversations run on a fixed pool of threads: at 128 and 1,024 hosts its
// threads never exceed ssh.max_parallel + kTalkThreads more than before the launch (the sampler's
// own thread included in both), and once every host is logged in the talkers alone are left.
TEST(SshBackendTree, FlatLaunchRunsOnAFixedPoolOfThreads) {
  for (const int n : {128, 1024}) {
    FakeConnector connector;
    for (int h = 0; h < n; ++h)
      connector.host("n" + std::to_string(h)).program = SubtreeAgent{};
    LaunchOptions o;
    o.ddlrun_path = "/opt/ddlrun";
    o.heartbeat_timeout = std::chrono::seconds(60);  // the agents played here send none
    o.tree_width = 0;
    const int before = threads_now();
    int exits = 0;
    int after_start = 0;
    const int peak = peak_threads([&] {
      EventQueue events;
      const std::unique_ptr<Backend> backend = make_ssh_backend(wide_job(n), o, connector);
      ASSERT_EQ(backend->start(events).size(), static_cast<size_t>(n));
      for (int i = 0; i < 200 && (after_start = threads_now()) > before + 1 + ssh::kTalkThreads;
           ++i)
        std::this_thread::sleep_for(milliseconds(10));  // the login threads are ending
      exits = exits_within_a_minute(events, n);
      backend->finish();
    });
    EXPECT_EQ(exits, n);
    EXPECT_LE(peak, before + 1 + o.ssh.max_parallel + ssh::kTalkThreads) << n << " hosts";
    EXPECT_LE(after_start, before + 1 + ssh::kTalkThreads) << n << " hosts";
    EXPECT_EQ(connector.connected().size(), static_cast<size_t>(n)) << n << " hosts";
  }
}

// A slow login holds only its own login thread: while n0's agent takes 1.5 s to start, n1's
// conversation is already driven (it gets ddlrun's heartbeat a second), and the job then runs.
TEST(SshBackendTree, ASlowLoginDoesNotStallTheOtherConversations) {
  FakeConnector connector;
  connector.host("n0").program = [](FakeRemote& r) {
    std::this_thread::sleep_for(milliseconds(1500));
    SubtreeAgent{}(r);
  };
  connector.host("n1").program = SubtreeAgent{};
  LaunchOptions o;
  o.ddlrun_path = "/opt/ddlrun";
  o.heartbeat_timeout = std::chrono::seconds(60);  // the agents played here send none
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(wide_job(2), o, connector);
  int beats = -1;
  std::thread watch([&] {
    std::this_thread::sleep_for(milliseconds(1300));
    std::shared_ptr<FakeRemote> n1;
    {
      ddl::ssh::FakeHost& h = connector.host("n1");
      if (!h.remotes.empty()) n1 = h.remotes.front();
    }
    if (!n1) return;
    ssh::FrameReader reader;  // test::frames leaves heartbeats out
    reader.feed(n1->written());
    beats = 0;
    while (auto f = reader.next())
      beats += f->type == FrameType::kHeartbeat ? 1 : 0;
  });
  const size_t started = backend->start(events).size();
  watch.join();
  EXPECT_EQ(started, 2u);
  EXPECT_GE(beats, 2);  // at once, and a second later
  backend->finish();
}

/// Plays an agent whose rank runs until it is signalled: hello, ready to its job, and on a
/// signal its rank's exit and done.
struct RunningAgent {
  void operator()(FakeRemote& r) const {
    r.print(hello_frame("running"));
    auto reader = std::make_shared<ssh::FrameReader>();
    auto own = std::make_shared<int>(-1);
    r.on_write([reader, own](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == FrameType::kJob) {
          *own = f->id;
          r.print(ssh::encode_frame(FrameType::kReady, 0, {}));
        }
        if (f->type == FrameType::kSignal) {
          r.print(exit_frame(*own, 0, f->id) + ssh::encode_frame(FrameType::kDone, 0, {}));
        }
      }
    });
  }
};

// A write never waits on a host. n0's socket takes nothing (its host cut off without
// a RST, while its agent still seems to speak) and half a MiB of stdin for rank 0 waits there:
// n1 and n2, on the same talker, go on being read (n1's output every 50 ms arrives with no gap
// of the 1.5 s a blocking write takes), and n0 is lost, named, once it took nothing for
// the heartbeat deadline, its session closed without waiting.
TEST(SshBackendTree, AHostWhoseSocketTakesNothingStallsNoOtherConversation) {
  FakeConnector connector;
  for (const char* h : {"n0", "n1", "n2"})
    connector.host(h).program = RunningAgent{};
  LaunchOptions o;
  o.ddlrun_path = "/opt/ddlrun";
  o.heartbeat_timeout = std::chrono::seconds(2);
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(wide_job(3), o, connector);
  ASSERT_EQ(backend->start(events).size(), 3u);
  std::vector<std::shared_ptr<FakeRemote>> remotes;
  for (const char* h : {"n0", "n1", "n2"})
    remotes.push_back(connector.host(h).remotes.at(0));
  remotes[0]->jam(milliseconds(1500));
  std::atomic<bool> done{false};
  std::thread agents([&] {  // every agent beats; n1's rank prints
    for (int i = 0; !done; ++i) {
      for (auto& r : remotes)
        r->print(ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
      remotes[1]->print(ssh::encode_frame(FrameType::kStdout, 1, std::to_string(i) + "\n"));
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  std::thread feed([&] { backend->write_stdin(std::string(size_t{2} << 20, 'x')); });
  const auto t0 = std::chrono::steady_clock::now();
  auto last_output = t0;
  milliseconds widest{0};
  std::vector<Event> failures;
  for (;;) {
    std::optional<Event> e = events.pop(t0 + std::chrono::milliseconds(4500));
    if (!e) break;
    const auto now = std::chrono::steady_clock::now();
    if (e->type == Event::Type::kOutput && e->host == 1) {
      widest = std::max(widest, std::chrono::duration_cast<milliseconds>(now - last_output));
      last_output = now;
    }
    if (e->type == Event::Type::kHostFailure) failures.push_back(*e);
  }
  const milliseconds from_last =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - last_output);
  backend->finish();
  done = true;
  agents.join();
  feed.join();
  EXPECT_LT(widest, milliseconds(1000));
  EXPECT_LT(from_last, milliseconds(1000));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].host, 0);
  EXPECT_NE(failures[0].data.find("took no data for 2 s ("), std::string::npos) << failures[0].data;
  EXPECT_NE(failures[0].data.find("bytes wait for it: the host is unreachable"), std::string::npos)
      << failures[0].data;
  EXPECT_TRUE(connector.host("n0").stopped_blocking);
}

// A slow link is not a host that takes no data. n0's link carries 48 KiB/s, so one
// 64 KiB write takes 1.3 s to drain, more than twice the 0.5 s heartbeat deadline: while its
// bytes move n0 is not lost, and rank 0's 100 KiB of stdin and its end arrive whole. (Counting
// the time until a whole write drained, as before, lost n0 after half a second.)
TEST(SshBackendTree, AHostBehindASlowLinkThatTakesBytesIsNotLost) {
  FakeConnector connector;
  for (const char* h : {"n0", "n1"})
    connector.host(h).program = RunningAgent{};
  LaunchOptions o;
  o.ddlrun_path = "/opt/ddlrun";
  o.heartbeat_timeout = milliseconds(500);
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(wide_job(2), o, connector);
  ASSERT_EQ(backend->start(events).size(), 2u);
  std::vector<std::shared_ptr<FakeRemote>> remotes;
  for (const char* h : {"n0", "n1"})
    remotes.push_back(connector.host(h).remotes.at(0));
  remotes[0]->throttle(48 << 10);
  std::atomic<bool> done{false};
  std::thread agents([&] {  // every agent beats
    while (!done) {
      for (auto& r : remotes)
        r->print(ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  const std::string data(size_t{100} << 10, 's');
  backend->write_stdin(data);
  backend->close_stdin();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Event> failures;
  std::string stdin_bytes;
  bool eof = false;
  while (!eof && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8)) {
    if (std::optional<Event> e = events.pop(std::chrono::steady_clock::now() + milliseconds(50))) {
      if (e->type == Event::Type::kHostFailure) failures.push_back(*e);
    }
    stdin_bytes.clear();
    for (const ssh::Frame& f : frames(remotes[0]->written())) {
      if (f.type == FrameType::kStdin) stdin_bytes += f.payload;
      eof = eof || f.type == FrameType::kStdinEof;
    }
  }
  backend->finish();
  done = true;
  agents.join();
  EXPECT_TRUE(failures.empty()) << failures.front().data;
  EXPECT_TRUE(eof);
  EXPECT_EQ(stdin_bytes.size(), data.size());
  EXPECT_TRUE(stdin_bytes == data);  // in order (not printed: 100 KiB)
}

TEST(SshBackendTree, StdinAndSignalsGoDownToRoutedHosts) {
  // Rank 0 on n3, the deepest host: its stdin goes routed through n1's channel.
  Job job = chain_job();
  job.topology.ranks[0].host = 2;
  job.topology.ranks[2].host = 0;
  FakeConnector connector;
  std::shared_ptr<FakeRemote> n1;
  connector.host("n1").program = [](FakeRemote& r) {
    // Every host says hello and is ready, and the ranks run on.
    r.print(hello_frame("n1"));
    auto reader = std::make_shared<ssh::FrameReader>();
    r.on_write([reader](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == FrameType::kSubtree) {
          r.print(ssh::route(1, hello_frame("n2")) + ssh::route(2, hello_frame("n3")));
        }
        if (f->type == FrameType::kJob) r.print(ssh::encode_frame(FrameType::kReady, 0, {}));
        if (f->type == FrameType::kRouted && f->payload.front() == 'J') {
          r.print(ssh::route(f->id, ssh::encode_frame(FrameType::kReady, 0, {})));
        }
      }
    });
  };
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(job, tree_options(), connector);
  backend->start(events);
  backend->write_stdin("to rank 0\n");
  backend->close_stdin();
  backend->signal(SIGUSR1);
  std::this_thread::sleep_for(milliseconds(300));
  std::map<int, std::string> routed;  // host -> the frame types routed to it
  for (const ssh::Frame& f : frames(connector.host("n1").remotes.at(0)->written())) {
    if (f.type != FrameType::kRouted) continue;
    for (const ssh::Frame& g : frames(f.payload)) {
      routed[f.id] += static_cast<char>(g.type);
      if (g.type == FrameType::kStdin) {
        EXPECT_EQ(f.id, 2);
        EXPECT_EQ(g.payload, "to rank 0\n");
      }
      if (g.type == FrameType::kSignal) {
        EXPECT_EQ(g.id, SIGUSR1);
      }
    }
  }
  EXPECT_EQ(routed[1], "JGMS");    // go with the host's output window (M)
  EXPECT_EQ(routed[2], "JGMSIE");  // control before stdin
  backend->signal(SIGKILL);
}

}  // namespace
}  // namespace ddl::launcher
