// --probe-links down the launch tree (launcher/ssh/tree_links.h, ddlrun/plan/agents.h): the N
// frame, an agent's link agent in a thread (LinkAgentThread, the real mapper::run_link_agent),
// and ddlrun's TreeLinks, as mapper::LinkChannels (link_channels), driving a first-level
// session kept by the probe through the recording ssh double
// (tests/ssh/fake_ssh.h), whose remote end plays the agents of a chain n1 -> n2 -> n3 (routing
// as their relays would) with a real link agent per host, so that mapper::probe_links measures
// real TCP links through it. Then the faults: a host lost mid-measurement, a lost parent,
// garbage from the first level or from below, a silent first level, a link agent that never
// answers. Each is bounded, names the host, and leaves no link agent running.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "ddlrun/plan/agents.h"
#include "launcher/launcher.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/ssh.h"
#include "launcher/ssh/tree.h"
#include "mapper/mapper.h"
#include "tests/launcher/ssh_frames.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

using ddl::ssh::FakeConnector;
using ddl::ssh::FakeRemote;
using ssh::FrameType;
using ssh::TreeHost;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using test::chain_job;
using test::frames;
using test::hello_frame;

/// Frames collected from a LinkAgentThread's up, thread-safe.
struct Collected {
  std::mutex mutex;
  std::string bytes;
  bool up(std::string_view b) {
    std::lock_guard lock(mutex);
    bytes.append(b);
    return true;
  }
  /// The N frames so far, waiting up to `ms` for at least `count`.
  std::vector<ssh::Frame> wait(size_t count, int ms = 5000) {
    std::vector<ssh::Frame> got;
    for (int i = 0; i < ms / 10; ++i) {
      {
        std::lock_guard lock(mutex);
        got = frames(bytes);
      }
      if (got.size() >= count) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return got;
  }
};

/// Whether something listens on 127.0.0.1:port.
bool listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(LinkLineFrame, IsKnownAndCarriesThePortAndTheLine) {
  EXPECT_EQ(static_cast<char>(FrameType::kLinkLine), '\x05');
  ssh::FrameReader reader;
  reader.feed(ssh::route(7, ssh::encode_frame(FrameType::kLinkLine, 29555, "token abc")));
  const std::optional<ssh::Frame> t = reader.next();
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->type, FrameType::kRouted);
  EXPECT_EQ(t->id, 7);
  const std::vector<ssh::Frame> inner = frames(t->payload);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].type, FrameType::kLinkLine);
  EXPECT_EQ(inner[0].id, 29555);
  EXPECT_EQ(inner[0].payload, "token abc");
}

TEST(LinkAgentThread, RunsTheLinkAgentAndSendsItsLinesUpUntilItEnds) {
  Collected up;
  ssh::LinkAgentThread links([&](std::string_view b) { return up.up(b); }, "10.1.2.3",
                             mapper::run_link_agent);
  links.take(0, "");
  std::vector<ssh::Frame> got = up.wait(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, FrameType::kLinkLine);
  EXPECT_EQ(got[0].id, 0);
  int port = 0;
  char client[64] = "";
  ASSERT_EQ(std::sscanf(got[0].payload.c_str(), "ddl-link-agent 2 %d %63s", &port, client), 2);
  EXPECT_STREQ(client, "10.1.2.3");  // where ddlrun logged in from, as the first level saw it
  EXPECT_TRUE(listening(port));
  links.take(0, "token abc");
  links.take(0, "what");
  got = up.wait(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].payload, "ready");
  EXPECT_EQ(got[2].payload, "error unknown request 'what'");
  links.take(0, "end");
  got = up.wait(4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].id, 1);  // it ended
  EXPECT_EQ(got[3].payload, "");
  links.stop();
  EXPECT_FALSE(listening(port));
  links.take(0, "");  // stopped: nothing starts again
  EXPECT_EQ(up.wait(5, 200).size(), 4u);
}

TEST(LinkAgentThread, StopEndsALinkAgentThatIsStillRunning) {
  Collected up;
  ssh::LinkAgentThread links([&](std::string_view b) { return up.up(b); }, "",
                             mapper::run_link_agent);
  links.take(0, "token abc");
  const std::vector<ssh::Frame> got = up.wait(2);
  ASSERT_EQ(got.size(), 2u);
  int port = 0;
  ASSERT_EQ(std::sscanf(got[0].payload.c_str(), "ddl-link-agent 2 %d", &port), 1);
  EXPECT_EQ(got[1].payload, "ready");
  const Clock::time_point start = Clock::now();
  links.stop();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(listening(port));
}

// The chain n1 (index 0, the first level) -> n2 (1) -> n3 (2), as the probe started it.
const std::vector<TreeHost> kChain = {{0, "n1", {{1, "n2", {{2, "n3", {}, {}}}, {}}}, {}}};

/// Plays n1's agent and, as the relays would, n2's and n3's: each host's N frames go to a
/// real link agent of its own (LinkAgentThread), whose lines come back routed from it.
struct ChainAgents {
  struct State {
    std::mutex mutex;
    std::map<int, std::unique_ptr<ssh::LinkAgentThread>> agents;
    std::set<int> deaf;  ///< hosts whose N frames are ignored (a link agent that never answers)
    /// When host `lose_on_test` gets its first "test" line, its parent reports it lost.
    int lose_on_test = -1;
    int ends = 0;  ///< link agents that said they ended
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  /// The first-level host played: n1 with the chain below it, or a host alone.
  std::string first = "n1";

  void operator()(FakeRemote& r) const {
    r.print(first != "n1" ? hello_frame(first)
                          : hello_frame("n1") + ssh::route(1, hello_frame("n2")) +
                                ssh::route(2, hello_frame("n3")));
    auto reader = std::make_shared<ssh::FrameReader>();
    r.on_write([s = state, reader](FakeRemote& r, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == FrameType::kLinkLine) take(s, r, 0, *f);
        if (f->type != FrameType::kRouted) continue;
        for (const ssh::Frame& g : frames(f->payload))
          if (g.type == FrameType::kLinkLine) take(s, r, f->id, g);
      }
    });
  }

  static void take(const std::shared_ptr<State>& s, FakeRemote& r, int host, const ssh::Frame& f) {
    ssh::LinkAgentThread* agent = nullptr;
    {
      std::lock_guard lock(s->mutex);
      if (s->deaf.contains(host)) return;
      if (host == s->lose_on_test && f.payload.starts_with("test ")) {
        s->lose_on_test = -1;
        r.print(ssh::encode_frame(FrameType::kLost, host, "no heartbeat for 10 s (x)"));
        return;
      }
      auto& a = s->agents[host];
      if (!a) {
        a = std::make_unique<ssh::LinkAgentThread>(
            [s, &r, host](std::string_view frames) {
              for (const ssh::Frame& g : test::frames(std::string(frames))) {
                std::lock_guard lock(s->mutex);
                s->ends += g.id == 1 ? 1 : 0;
              }
              r.print(host == 0 ? std::string(frames) : ssh::route(host, frames));
              return true;
            },
            "10.9.9.1", mapper::run_link_agent);
      }
      agent = a.get();
    }
    agent->take(f.id, f.payload);
  }
};

/// A kept session for n1, its agent played by `agents`, as the probe left it.
struct Kept {
  FakeConnector connector;
  ssh::AgentTree sessions;
  ChainAgents agents;
  std::shared_ptr<FakeRemote> remote;

  Kept() {
    connector.host("n1").program = agents;
    std::unique_ptr<ddl::ssh::Session> session = connector.connect("n1", {});
    std::unique_ptr<ddl::ssh::Channel> channel = session->exec("/x/ddlrun --probe-agent");
    remote = connector.host("n1").remotes.at(0);
    ssh::SubtreeFrame w;
    w.children = kChain[0].children;
    sessions.put("n1", {std::move(session), std::move(channel), "", "/x/ddlrun --probe-agent",
                        ssh::encode(w)});
  }
  ~Kept() {
    std::map<int, std::unique_ptr<ssh::LinkAgentThread>> stopping;
    {
      std::lock_guard lock(agents.state->mutex);
      stopping.swap(agents.state->agents);
    }
    stopping.clear();  // every link agent stopped (outside the lock their lines take)
  }
};

std::vector<mapper::LinkHost> chain_hosts() {
  return {{"n1", "127.0.0.1", false}, {"n2", "127.0.0.1", false}, {"n3", "127.0.0.1", false}};
}

/// The hosts reach_hosts could not reach, and why: none in these tests, but n7.
const std::map<std::string, std::string> kUnreached = {{"n7", "connection refused (n7:22)"}};

mapper::LinkProbeOptions probe_options(ssh::TreeLinks& tree) {
  mapper::LinkProbeOptions lo;
  lo.answer_timeout = milliseconds(3000);
  lo.budget_s = 0.3;
  lo.open = ddlrun::link_channels(tree, kUnreached);
  return lo;
}

/// The channel to `host`'s link agent along `tree`, as probe_links opens it.
std::unique_ptr<mapper::LinkChannel> open(ssh::TreeLinks& tree, const std::string& host) {
  return ddlrun::link_channels(tree, kUnreached)(mapper::LinkHost{host, "127.0.0.1", false}, 0);
}

/// Why opening `host`'s link agent along `tree` fails (its LinkError), or "opened".
std::string open_error(ssh::TreeLinks& tree, const std::string& host) {
  try {
    return open(tree, host) != nullptr ? "opened" : "null";
  } catch (const mapper::LinkError& e) {
    return e.what();
  }
}

/// What `channel` says when it fails, or "answered: LINE".
std::string failure(mapper::LinkChannel& channel, milliseconds timeout) {
  try {
    return "answered: " + channel.line(timeout);
  } catch (const mapper::LinkError& e) {
    return e.what();
  }
}

TEST(TreeLinks, MeasuresThroughTheFirstLevelsSessionAndGivesItBack) {
  Kept k;
  std::vector<std::string> notes;
  mapper::LinkMeasurement m;
  {
    k.sessions.set_tree(kChain);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    EXPECT_EQ(k.sessions.size(), 0u);  // held while it measures
    m = mapper::probe_links(chain_hosts(), probe_options(tree), notes);
  }
  EXPECT_EQ(m.pairs.size(), 3u);
  for (const std::string& n : notes)
    EXPECT_EQ(n.find(" -> "), std::string::npos) << n;
  EXPECT_EQ(k.connector.connected(), std::vector<std::string>{"n1"});  // no other login
  {
    std::lock_guard lock(k.agents.state->mutex);
    EXPECT_EQ(k.agents.state->ends, 3);  // every link agent was told "end" and ended
  }
  // The session goes back with its channel, and the frames that were not the link agents'
  // (the hellos), for the launch.
  ssh::AgentTree::Kept back = k.sessions.take("n1");
  ASSERT_TRUE(back.channel != nullptr);
  EXPECT_FALSE(back.subtree.empty());
  EXPECT_EQ(back.pending, hello_frame("n1") + ssh::route(1, hello_frame("n2")) +
                              ssh::route(2, hello_frame("n3")));
  // Down the channel: heartbeats, n1's N frames as they are, the others' routed to them.
  std::set<int> routed_to;
  for (const ssh::Frame& f : frames(k.remote->written())) {
    ASSERT_TRUE(f.type == FrameType::kLinkLine || f.type == FrameType::kRouted);
    if (f.type == FrameType::kRouted) routed_to.insert(f.id);
  }
  EXPECT_EQ(routed_to, (std::set<int>{1, 2}));
}

TEST(TreeLinks, AHostLostMidMeasurementIsNamedAndTheRestMeasured) {
  Kept k;
  k.agents.state->lose_on_test = 1;  // n2's parent reports it lost at its first test
  std::vector<std::string> notes;
  mapper::LinkMeasurement m;
  const Clock::time_point start = Clock::now();
  {
    k.sessions.set_tree(kChain);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    m = mapper::probe_links(chain_hosts(), probe_options(tree), notes);
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  std::string all;
  for (const std::string& n : notes)
    all += n + "\n";
  EXPECT_NE(all.find("--probe-links: n2 -> n3: the link agent ended: no heartbeat for 10 s (x)\n"),
            std::string::npos)
      << all;
  EXPECT_LT(m.pairs.size(), 3u);
  // Each lost host named once more, its later pairs left out rather than waited for.
  EXPECT_NE(all.find("--probe-links: n2: the link agent ended: no heartbeat for 10 s (x); its "
                     "pairs after that were not measured\n"),
            std::string::npos)
      << all;
  // The L goes on to the launch, which names the host too.
  const ssh::AgentTree::Kept back = k.sessions.take("n1");
  bool lost = false;
  for (const ssh::Frame& f : frames(back.pending))
    lost = lost || (f.type == FrameType::kLost && f.id == 1);
  EXPECT_TRUE(lost);
}

TEST(TreeLinks, ALostParentTakesItsSubtreeWithItInTheFlatPathsWords) {
  Kept k;
  k.sessions.set_tree(kChain);
  ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
  std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
  std::unique_ptr<mapper::LinkChannel> n3 = open(tree, "n3");
  ASSERT_TRUE(n2 && n3);
  EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
  EXPECT_TRUE(n3->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
  k.remote->print(ssh::encode_frame(FrameType::kLost, 1, "the connection to its agent closed"));
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(failure(*n3, milliseconds(5000)), "the link agent ended: lost with its tree parent n2");
  EXPECT_EQ(failure(*n2, milliseconds(5000)),
            "the link agent ended: the connection to its agent closed");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  try {
    n2->send("test 127.0.0.1 1");
    ADD_FAILURE() << "sent to a lost host";
  } catch (const mapper::LinkError& e) {
    EXPECT_STREQ(e.what(), "the link agent ended: the connection to its agent closed");
  }
  std::unique_ptr<mapper::LinkChannel> n1 = open(tree, "n1");  // above it: still there
  EXPECT_TRUE(n1->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
}

TEST(TreeLinks, GarbageFromTheFirstLevelLosesItsSubtreeAndItsChannel) {
  Kept k;
  {
    k.sessions.set_tree(kChain);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    std::unique_ptr<mapper::LinkChannel> n1 = open(tree, "n1");
    std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
    EXPECT_TRUE(n1->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
    EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
    k.remote->print("\x7fWelcome to n1, a garbage frame\n");
    EXPECT_EQ(failure(*n2, milliseconds(5000)),
              "the link agent ended: lost with its tree parent n1");
    EXPECT_EQ(failure(*n1, milliseconds(5000)),
              "the link agent ended: protocol error: unexpected byte 127 from the agent (is "
              "something printing on its stdout, such as a login script?)");
  }
  // Back closed, saying why (the launch fails n1 with it), without anything it sent.
  const ssh::AgentTree::Kept back = k.sessions.take("n1");
  EXPECT_TRUE(back.session == nullptr);
  EXPECT_TRUE(back.channel == nullptr);
  EXPECT_TRUE(back.pending.empty());
  EXPECT_TRUE(back.subtree.empty());
  EXPECT_EQ(back.lost,
            "protocol error: unexpected byte 127 from the agent (is something printing on its "
            "stdout, such as a login script?)");
  EXPECT_TRUE(k.remote->closed());
  EXPECT_EQ(k.connector.host("n1").sessions_open, 0);
}

/// Launches the chain job through `k`'s kept sessions, as ddlrun does after --probe-links:
/// the launch's error ("" when the job started).
std::string launch_after_links(Kept& k) {
  LaunchOptions o;
  o.ddlrun_path = "/x/ddlrun";
  o.tree_width = 1;
  o.ssh.command_timeout = milliseconds(2000);
  o.agents = std::shared_ptr<ssh::AgentTree>(std::shared_ptr<void>(), &k.sessions);
  k.sessions.set_tree(kChain);
  EventQueue events;
  const std::unique_ptr<Backend> backend = make_ssh_backend(chain_job(), o, k.connector);
  std::string error;
  try {
    backend->start(events);
  } catch (const LaunchError& e) {
    error = e.what();
  }
  backend->finish();
  return error;
}

// n1, on the first level, loses its connection mid-measurement. The launch that then
// takes the tree over names n1 once, with the 2 hosts below it, logs in to no host again (nor
// runs an agent anew on n1, whose new agent would log in to n2 and n3 again), starts no rank,
// and leaves no session open.
TEST(TreeLinks, AFirstLevelLostMidMeasurementFailsTheLaunchWithoutANewLogin) {
  Kept k;
  {
    k.sessions.set_tree(kChain);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
    EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
    k.remote->end(-1);  // the connection to n1 closes
    EXPECT_EQ(failure(*n2, milliseconds(5000)),
              "the link agent ended: lost with its tree parent n1");
  }
  EXPECT_EQ(launch_after_links(k),
            "cannot start the job on 1 of 3 hosts:\n"
            "  n1: the connection to its agent closed; the 2 hosts below it in the launch "
            "tree are lost with it\n"
            "fix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or "
            "leave them out of the host list");
  EXPECT_EQ(k.connector.connected(), std::vector<std::string>{"n1"});  // the probe's login only
  EXPECT_EQ(k.connector.host("n1").commands.size(), 1u);               // the probe's agent only
  for (const ssh::Frame& f : frames(k.remote->written()))
    EXPECT_NE(f.type, FrameType::kJob);
  EXPECT_EQ(k.connector.host("n1").sessions_open, 0);
}

// n1's agent dies after --probe-links gave its session back, before the launch takes
// it (here its channel closes; then its agent said why it gave up). The launch names n1 with
// the hosts below it and the reason, logs in to no host again (a new agent on n1 would log in
// to n2 and n3 a second time, while their first agents may still run), starts no rank, and
// leaves no session open. Before, it logged in to n1 anew and started the subtree again.
TEST(TreeLinks, AKeptChannelThatDiesBeforeTheLaunchTakesItFailsTheLaunchWithoutANewLogin) {
  for (const bool said_why : {false, true}) {
    Kept k;
    {
      k.sessions.set_tree(kChain);
      ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
      std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
      EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
      n2->send("end");
    }
    ASSERT_EQ(k.sessions.size(), 1u);  // given back alive
    if (said_why) {
      k.remote->print(
          ssh::encode_frame(FrameType::kFailure, 1, "no heartbeat from ddlrun for 10 s"));
    }
    k.remote->end(-1);
    const std::string why =
        said_why ? "no heartbeat from ddlrun for 10 s" : "the connection to its agent closed";
    EXPECT_EQ(launch_after_links(k),
              "cannot start the job on 1 of 3 hosts:\n"
              "  n1: " +
                  why +
                  "; the 2 hosts below it in the launch tree are lost with it\n"
                  "fix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or "
                  "leave them out of the host list");
    EXPECT_EQ(k.connector.connected(), std::vector<std::string>{"n1"});  // the probe's login only
    EXPECT_EQ(k.connector.host("n1").commands.size(), 1u);               // the probe's agent only
    for (const ssh::Frame& f : frames(k.remote->written())) {
      EXPECT_NE(f.type, FrameType::kJob);
      EXPECT_NE(f.type, FrameType::kSubtree);
    }
    EXPECT_EQ(k.connector.host("n1").sessions_open, 0);
  }
}

/// m1, a second first-level host (no host below it), kept beside `k`'s n1 as the probe left
/// it, and both agents beating every 50 ms, as theirs do, while it lives.
struct BesideN1 {
  ChainAgents agent;
  std::vector<std::shared_ptr<FakeRemote>> remotes;
  std::atomic<bool> done{false};
  std::thread beats;

  explicit BesideN1(Kept& k) {
    agent.first = "m1";
    k.connector.host("m1").program = agent;
    std::unique_ptr<ddl::ssh::Session> session = k.connector.connect("m1", {});
    std::unique_ptr<ddl::ssh::Channel> channel = session->exec("/x/ddlrun --probe-agent");
    k.sessions.put("m1", {std::move(session), std::move(channel), "", "/x/ddlrun --probe-agent"});
    remotes = {k.remote, k.connector.host("m1").remotes.at(0)};
    beats = std::thread([this] {
      for (; !done; std::this_thread::sleep_for(milliseconds(50)))
        for (auto& r : remotes)
          r->print(ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
    });
  }
  ~BesideN1() {
    done = true;
    beats.join();
    std::map<int, std::unique_ptr<ssh::LinkAgentThread>> stopping;  // as ~Kept does
    std::lock_guard lock(agent.state->mutex);
    stopping.swap(agent.state->agents);
  }
  /// The tree: n1 with n2 and n3 below it, and m1.
  static std::vector<TreeHost> tree() {
    std::vector<TreeHost> two = kChain;
    two.push_back({3, "m1", {}, {}});
    return two;
  }
};

/// Round trips ("token t", "ready") to `m1` for `span` from now: the widest, and how long
/// after now host 0 of `tree` was lost (0: not within `span`).
std::pair<milliseconds, milliseconds> round_trips(ssh::TreeLinks& tree, mapper::LinkChannel& m1,
                                                  milliseconds span) {
  const Clock::time_point start = Clock::now();
  milliseconds widest{0}, to_loss{0};
  while (Clock::now() - start < span) {
    const Clock::time_point asked = Clock::now();
    m1.send("token t");
    EXPECT_EQ(m1.line(milliseconds(3000)), "ready");
    widest = std::max(widest, std::chrono::duration_cast<milliseconds>(Clock::now() - asked));
    if (to_loss == milliseconds(0) && !tree.gone(0).empty())
      to_loss = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    std::this_thread::sleep_for(milliseconds(20));
  }
  return {widest, to_loss};
}

// n1's socket takes nothing (its host cut off without a RST, while its agent still
// beats). TreeLinks loses it within the heartbeat deadline in the launch's words, with the
// hosts below it, and gives its session back closed (without waiting), saying why, so that the
// launch fails n1 as it fails a host that took no data. m1, the other first-level host, goes on
// answering meanwhile: a write that waited for n1's socket (3 s) would stall it. Before, n1
// was never lost while it beat.
TEST(TreeLinks, AFirstLevelThatTakesNoDataIsLostWithoutStallingTheOthers) {
  Kept k;
  std::string n1_failure, n2_failure;
  milliseconds widest{0}, to_loss{0};
  {
    BesideN1 m1_host(k);
    k.sessions.set_tree(BesideN1::tree());
    ssh::TreeLinks tree(k.sessions, milliseconds(1000));
    std::unique_ptr<mapper::LinkChannel> n1 = open(tree, "n1");
    std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
    std::unique_ptr<mapper::LinkChannel> m1 = open(tree, "m1");
    for (auto* c : {n1.get(), n2.get(), m1.get()})
      EXPECT_TRUE(c->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
    k.remote->jam(milliseconds(3000));
    std::tie(widest, to_loss) = round_trips(tree, *m1, milliseconds(5000));
    n1_failure = failure(*n1, milliseconds(100));
    n2_failure = failure(*n2, milliseconds(100));
    m1->send("end");
  }
  EXPECT_TRUE(std::regex_match(
      n1_failure, std::regex(R"(the link agent ended: took no data for 1 s \([0-9]+ bytes )"
                             R"(wait for it: the host is unreachable, or its agent is stopped )"
                             R"(or hung\))")))
      << n1_failure;
  EXPECT_EQ(n2_failure, "the link agent ended: lost with its tree parent n1");
  EXPECT_GT(to_loss, milliseconds(0));
  EXPECT_LT(to_loss, milliseconds(3500));
  EXPECT_LT(widest, milliseconds(2000));
  const ssh::AgentTree::Kept back = k.sessions.take("n1");
  EXPECT_TRUE(back.session == nullptr);
  EXPECT_EQ(back.lost, n1_failure.substr(std::string("the link agent ended: ").size()));
  EXPECT_TRUE(k.connector.host("n1").stopped_blocking);
  EXPECT_EQ(k.connector.host("n1").sessions_open, 0);
  EXPECT_TRUE(k.sessions.take("m1").channel != nullptr);  // m1 goes back as it came
}

// A first-level agent that speaks for a host not below it (here: not in the tree at all) is a
// protocol error, as in the relays and the launch: it cannot have another host lost, or pass
// its frames off as that host's.
TEST(TreeLinks, AFrameForAHostNotBelowTheFirstLevelLosesItsChannel) {
  for (const std::string& frame :
       {ssh::encode_frame(FrameType::kLost, 7, "no heartbeat for 10 s"),
        ssh::route(7, ssh::encode_frame(FrameType::kHeartbeat, 0, ""))}) {
    Kept k;
    k.sessions.set_tree(kChain);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    std::unique_ptr<mapper::LinkChannel> n1 = open(tree, "n1");
    EXPECT_TRUE(n1->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
    k.remote->print(frame);
    EXPECT_EQ(failure(*n1, milliseconds(5000)),
              "the link agent ended: protocol error: a frame for host 7, which is not below n1 in "
              "the launch tree");
  }
}

// A routed frame whose payload ends inside a frame loses its host, rather than dropping the
// rest without a word.
TEST(TreeLinks, ARoutedFrameEndingInsideAFrameLosesThatHost) {
  Kept k;
  k.sessions.set_tree(kChain);
  ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
  std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
  EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
  const std::string whole = ssh::encode_frame(FrameType::kHeartbeat, 0, "");
  k.remote->print(ssh::route(1, whole + whole.substr(0, whole.size() - 1)));
  EXPECT_EQ(failure(*n2, milliseconds(5000)),
            "the link agent ended: protocol error: a routed frame ends inside a frame");
}

TEST(TreeLinks, GarbageRoutedFromBelowLosesThatHostOnly) {
  Kept k;
  k.sessions.set_tree(kChain);
  ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
  std::unique_ptr<mapper::LinkChannel> n2 = open(tree, "n2");
  std::unique_ptr<mapper::LinkChannel> n3 = open(tree, "n3");
  EXPECT_TRUE(n3->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
  k.remote->print(ssh::route(2, "\x7fgarbage, not a frame"));
  EXPECT_EQ(failure(*n3, milliseconds(5000)),
            "the link agent ended: protocol error: unexpected byte 127 from the agent (is "
            "something printing on its stdout, such as a login script?)");
  EXPECT_TRUE(n2->line(milliseconds(3000)).starts_with("ddl-link-agent 2 "));
}

TEST(TreeLinks, ASilentFirstLevelIsLostWithinTheHeartbeatDeadline) {
  FakeConnector connector;
  ssh::AgentTree sessions;
  std::unique_ptr<ddl::ssh::Session> session = connector.connect("n1", {});
  std::unique_ptr<ddl::ssh::Channel> channel = session->exec("/x/ddlrun --probe-agent");
  sessions.put("n1", {std::move(session), std::move(channel), "", "", "w"});
  sessions.set_tree(kChain);
  ssh::TreeLinks tree(sessions, milliseconds(300));
  std::unique_ptr<mapper::LinkChannel> n3 = open(tree, "n3");
  std::unique_ptr<mapper::LinkChannel> n1 = open(tree, "n1");
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(failure(*n1, milliseconds(5000)),
            "the link agent ended: no heartbeat for 0.3 s (the host is unreachable, or its "
            "agent is stopped or hung)");
  EXPECT_EQ(failure(*n3, milliseconds(5000)), "the link agent ended: lost with its tree parent n2");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(TreeLinks, ALinkAgentThatNeverAnswersIsNamedInTime) {
  Kept k;
  k.agents.state->deaf.insert(2);
  std::vector<std::string> notes;
  k.sessions.set_tree(kChain);
  ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
  mapper::LinkProbeOptions lo = probe_options(tree);
  lo.answer_timeout = milliseconds(300);
  const Clock::time_point start = Clock::now();
  try {
    mapper::probe_links(chain_hosts(), lo, notes);
    ADD_FAILURE() << "measured without n3's agent";
  } catch (const mapper::LinkError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot start the link agent on 1 of 3 hosts:\n"
                 "  n3: the link agent did not answer in time");
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(TreeLinks, AHostOutsideTheTreeOrItsKeptSessionsFailsWithWhyItWasNotReached) {
  Kept k;
  // n4 below n1 and n5 under a first-level n6 whose session was not kept.
  const std::vector<TreeHost> tree_hosts = {{0, "n1", {{1, "n2", {{2, "n3", {}, {}}}, {}}}, {}},
                                            {5, "n6", {{4, "n5", {}, {}}}, {}}};
  {
    k.sessions.set_tree(tree_hosts);
    ssh::TreeLinks tree(k.sessions, milliseconds(10'000));
    EXPECT_EQ(open_error(tree, "n9"), "not reached by ddlrun's agents");
    EXPECT_EQ(open_error(tree, "n5"), "not reached by ddlrun's agents");
    EXPECT_EQ(open_error(tree, "n6"), "not reached by ddlrun's agents");
    EXPECT_EQ(open_error(tree, "n7"), "connection refused (n7:22)");
    EXPECT_EQ(open_error(tree, "n3"), "opened");
  }
  // A first-level host the probe lost (Kept::lost, no session) goes back as it was, for the
  // launch to name it without logging in to it again.
  ssh::AgentTree::Kept lost;
  lost.lost = "took no data for 10 s (x)";
  k.sessions.put("n6", std::move(lost));
  { ssh::TreeLinks tree(k.sessions, milliseconds(10'000)); }
  EXPECT_EQ(k.sessions.take("n6").lost, "took no data for 10 s (x)");
}

}  // namespace
}  // namespace ddl::launcher
