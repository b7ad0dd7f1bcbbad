// ddlrun's agents (launcher/ssh/agent_tree.h, tree.h, relay.h): the kept sessions and their
// keep-alive, the command output frame (V) and its exact errors, a first-level agent asked
// for its inventory (ask_agents), each host's command in
// the subtree frame, an interior agent's relay running a child's command before its agent,
// and start_subtree collecting the outputs of a first-level host's subtree through the
// recording ssh double (tests/ssh/fake_ssh.h).

#include "launcher/ssh/agent_tree.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>

#include "base/net/codec.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/relay.h"
#include "launcher/ssh/tree.h"
#include "tests/launcher/ssh_frames.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

using ddl::ssh::FakeConnector;
using ddl::ssh::FakeRemote;
using ssh::CommandOutput;
using ssh::FrameType;
using ssh::TreeHost;
using std::chrono::milliseconds;
using test::frames;
using test::hello_frame;

constexpr const char* kProbe = "/x/ddlrun --probe-agent";

std::string output_error(const std::string& payload) {
  try {
    ssh::decode_command_output(payload);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "decoded";
}

TEST(AgentTree, KeepsOneSessionPerHostUntilTaken) {
  FakeConnector connector;
  connector.host("node1").endpoint = "10.0.0.1:22";
  ssh::AgentTree kept;
  EXPECT_EQ(kept.take("node1").session, nullptr);
  kept.put("node1", ssh::AgentTree::Kept{connector.connect("node1", {}), {}, {}, {}});
  kept.put("node2", ssh::AgentTree::Kept{connector.connect("node2", {}), {}, {}, {}});
  EXPECT_EQ(kept.size(), 2u);
  ssh::AgentTree::Kept one = kept.take("node1");
  ASSERT_NE(one.session, nullptr);
  EXPECT_EQ(one.session->endpoint(), "10.0.0.1:22");
  EXPECT_EQ(kept.take("node1").session, nullptr);  // taken once
  EXPECT_EQ(kept.size(), 1u);
}

TEST(AgentTree, HasLooksWithoutTaking) {
  FakeConnector connector;
  ssh::AgentTree kept;
  EXPECT_FALSE(kept.has("node1"));
  kept.put("node1", ssh::AgentTree::Kept{connector.connect("node1", {}), {}, {}, {}});
  ssh::AgentTree::Kept lost;
  lost.lost = "node2's agent is gone";
  kept.put("node2", std::move(lost));  // kept for its reason, but no session
  EXPECT_TRUE(kept.has("node1"));
  EXPECT_TRUE(kept.has("node1"));  // still there
  EXPECT_FALSE(kept.has("node2"));
  EXPECT_EQ(kept.take("node2").lost, "node2's agent is gone");
  ASSERT_NE(kept.take("node1").session, nullptr);
  EXPECT_FALSE(kept.has("node1"));
}

TEST(AgentTree, PutReplacesAndClosesTheOldOne) {
  FakeConnector connector;
  ssh::AgentTree kept;
  kept.put("node1", ssh::AgentTree::Kept{connector.connect("node1", {}), {}, {}, {}});
  EXPECT_EQ(connector.host("node1").sessions_open, 1);
  kept.put("node1", ssh::AgentTree::Kept{connector.connect("node1", {}), {}, {}, {}});
  EXPECT_EQ(connector.host("node1").sessions_open, 1);
  EXPECT_EQ(kept.size(), 1u);
}

TEST(AgentTree, DestroyingClosesWhatWasNotTaken) {
  FakeConnector connector;
  connector.host("node1").program = [](FakeRemote&) {};
  {
    ssh::AgentTree kept;
    std::unique_ptr<ddl::ssh::Session> session = connector.connect("node1", {});
    std::unique_ptr<ddl::ssh::Channel> channel = session->exec("agent");
    kept.put("node1", ssh::AgentTree::Kept{std::move(session), std::move(channel), "", "agent"});
  }
  EXPECT_EQ(connector.host("node1").sessions_open, 0);
  EXPECT_TRUE(connector.host("node1").remotes.at(0)->closed());
}

// ddlrun's heartbeat while it plans (keep_agents_alive): every
// session kept is beaten each interval, one taken is not, and destroying stops the beats.
TEST(AgentTree, KeepAliveBeatsEachKeptSessionUntilTakenOrDestroyed) {
  FakeConnector connector;
  std::mutex mutex;
  std::map<std::string, int> beats;  // by endpoint ("node1:22")
  const auto count = [&](const std::string& endpoint) {
    std::lock_guard lock(mutex);
    return beats[endpoint];
  };
  {
    ssh::AgentTree kept;
    kept.put("node1", ssh::AgentTree::Kept{connector.connect("node1", {}), {}, {}, {}});
    kept.put("node2", ssh::AgentTree::Kept{connector.connect("node2", {}), {}, {}, {}});
    kept.keep_alive(
        [&](ssh::AgentTree::Kept& k) {
          std::lock_guard lock(mutex);
          ++beats[k.session->endpoint()];
          k.pending += "b";
        },
        std::chrono::milliseconds(10));
    ssh::AgentTree::Kept one = kept.take("node1");
    ASSERT_NE(one.session, nullptr);
    const int one_beats = count("node1:22");
    for (int i = 0; i < 500 && count("node2:22") < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(count("node2:22"), 3);
    EXPECT_EQ(count("node1:22"), one_beats);  // taken: no more beats
    ssh::AgentTree::Kept two = kept.take("node2");
    EXPECT_GE(two.pending.size(), 3u);  // what a beat read stays with the session
    kept.put("node2", std::move(two));
  }
  const int after = count("node2:22");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(count("node2:22"), after);  // destroyed: the beats stopped
}

// ddlrun takes SIGINT and the like with sigtimedwait() on a thread that blocks them: the beat
// thread, made while they were not blocked, must not take them (a signal's default action
// there would end ddlrun at once).
TEST(AgentTree, TheKeepAliveThreadTakesNoSignal) {
  ssh::AgentTree kept;
  kept.keep_alive([](ssh::AgentTree::Kept&) {}, std::chrono::milliseconds(10));
  sigset_t usr1;
  sigset_t old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  const timespec wait{5, 0};
  EXPECT_EQ(sigtimedwait(&usr1, nullptr, &wait), SIGUSR1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(CommandOutputFrame, RoundTripsAndMalformedOnesAreNamed) {
  const CommandOutput ok{0, "", "version: 1\n", ""};
  EXPECT_EQ(ssh::decode_command_output(ssh::encode(ok)), ok);
  const CommandOutput killed{-1, "KILL", "half", "sh: oops\n"};
  EXPECT_EQ(ssh::decode_command_output(ssh::encode(killed)), killed);
  const std::string good = ssh::encode(killed);
  EXPECT_EQ(output_error(good.substr(0, 6)), "malformed command output frame: truncated");
  EXPECT_EQ(output_error(good + "x"), "malformed command output frame: trailing bytes");
  EXPECT_EQ(output_error(ssh::encode(CommandOutput{-2, "", "", ""})),
            "malformed command output frame: exit status -2");
}

TEST(SubtreeFrame, CarriesEachHostsCommand) {
  ssh::SubtreeFrame f;
  f.children = {{1, "a", {{3, "c", {}, kProbe}}, {}}, {2, "b", {}, kProbe}};
  EXPECT_EQ(ssh::decode_subtree(ssh::encode(f)).children, f.children);
}

TEST(TreeTexts, AProbeBelowNamesItsParentOrTheHostAboveThatFailed) {
  EXPECT_EQ(ssh::from_parent_text("node3"), " (from node3, its parent in the launch tree)");
  EXPECT_EQ(ssh::unreached_text("node3"),
            "not reached: node3, above it in the launch tree, failed");
}

/// The frames routed from `host` in `got`, unwrapped, in order.
std::vector<ssh::Frame> from(const std::vector<ssh::Frame>& got, int host) {
  std::vector<ssh::Frame> out;
  for (const ssh::Frame& f : got) {
    if (f.type != FrameType::kRouted || f.id != host) continue;
    for (ssh::Frame& g : frames(f.payload))
      out.push_back(std::move(g));
  }
  return out;
}

const std::string kInventory = "version: 1\nhost: {name: c1}\n";

/// The answer to an inventory request of a fake agent whose host has kInventory.
std::string inventory_answer() {
  return ssh::encode_frame(FrameType::kInventory, 0, kInventory);
}

// A child running a command (ddlrun's agent, named as its probe) sends frames from the start:
// its hello, then its answer to the inventory request routed to it, both up as from it; one
// whose command ends before its hello sends up all it printed and how it ended (V).
TEST(Relay, AChildsAgentAnswersItsRequestAndACommandThatEndsFirstSendsItsOutput) {
  FakeConnector connector;
  connector.host("c1").program = [](FakeRemote& r) {
    r.print("sh: warning\n", ddl::ssh::Stream::kStderr);
    r.print(hello_frame("c1"));
    auto reader = std::make_shared<ssh::FrameReader>();
    r.on_write([reader](FakeRemote& remote, std::string_view bytes) {
      reader->feed(bytes);
      while (auto f = reader->next()) {
        if (f->type == FrameType::kInventory) remote.print(inventory_answer());
      }
    });
  };
  connector.host("c2").program = [](FakeRemote& r) {
    r.print("sh: 1: /x/ddlrun: not found\n", ddl::ssh::Stream::kStderr);
    r.end(127);
  };
  std::mutex mutex;
  std::string up;
  ssh::SubtreeFrame spec;
  spec.ddlrun_path = "/x/ddlrun";
  spec.heartbeat_timeout = milliseconds(2000);
  spec.children = {{1, "c1", {}, kProbe}, {2, "c2", {}, kProbe}};
  ssh::Relay relay(
      spec, "c0",
      [&](std::string_view b) {
        std::lock_guard lock(mutex);
        up.append(b);
        return true;
      },
      connector);
  relay.start();
  relay.down(1, ssh::encode_frame(FrameType::kInventory, 0, {}));
  std::vector<ssh::Frame> got;
  for (int i = 0; i < 300 && (from(got, 1).size() < 2 || from(got, 2).empty()); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    std::lock_guard lock(mutex);
    got = frames(up);
  }
  const std::vector<ssh::Frame> c1 = from(got, 1);
  ASSERT_EQ(c1.size(), 2u);
  EXPECT_EQ(c1[0].type, FrameType::kHello);
  EXPECT_EQ(c1[1].type, FrameType::kInventory);
  EXPECT_EQ(c1[1].payload, kInventory);
  const std::vector<ssh::Frame> c2 = from(got, 2);
  ASSERT_EQ(c2.size(), 1u);  // its output and how it ended; no failure of its own
  EXPECT_EQ(c2[0].type, FrameType::kOutput);
  EXPECT_EQ(ssh::decode_command_output(c2[0].payload),
            (CommandOutput{127, "", "", "sh: 1: /x/ddlrun: not found\n"}));
  EXPECT_EQ(connector.host("c1").commands, std::vector<std::string>{kProbe});
  relay.upstream_gone();
}

/// A fake agent on n0 that, asked for its inventory (Hw), prints `reply` (in pieces of at most
/// `piece` bytes), after `note` on stderr.
void asked_agent(FakeConnector& connector, const std::string& reply, size_t piece = 1 << 30,
                 const std::string& note = {}) {
  connector.host("n0").program = [=](FakeRemote& r) {
    r.on_write([=](FakeRemote& remote, std::string_view bytes) {
      if (bytes != ssh::encode_frame(FrameType::kInventory, 0, {})) return;
      remote.print(note, ddl::ssh::Stream::kStderr);
      for (size_t at = 0; at < reply.size(); at += piece)
        remote.print(reply.substr(at, piece));
    });
  };
}

/// Options whose command timeout is `timeout`.
ddl::ssh::Options timed(milliseconds timeout) {
  ddl::ssh::Options o;
  o.command_timeout = timeout;
  return o;
}

/// ask_agents for one host: its answer, `kept` its session when it answered.
ssh::AgentAnswer ask_one(FakeConnector& connector, const std::string& host,
                         const ddl::ssh::Options& options, ssh::AgentTree::Kept& kept) {
  ssh::AgentTree agents;
  ssh::AgentAnswer a = ssh::ask_agents(connector, {host}, options, kProbe, agents).at(0);
  kept = agents.take(host);
  return a;
}

// A first-level agent is asked for its inventory as its channel opens: its answer, wherever the
// reads split it, is the output of a probe (stderr before it kept), and the session stays with
// the agent's channel and the frames besides the answer (its hello, a heartbeat after) for the
// subtree's start and the launch.
TEST(AskAgent, TakesTheAnswerAndKeepsTheChannelWithTheOtherFrames) {
  const std::string big = "version: 1\n#" + std::string(20000, 'x') + "\n";
  const std::string beat = ssh::encode_frame(FrameType::kHeartbeat, 0, {});
  for (const size_t piece : {size_t{1} << 30, size_t{16380}, size_t{7}}) {
    FakeConnector connector;
    asked_agent(connector,
                hello_frame("n0") + ssh::encode_frame(FrameType::kInventory, 0, big) + beat, piece,
                "a note\n");
    ssh::AgentTree::Kept kept;
    const ssh::AgentAnswer a = ask_one(connector, "n0", timed(milliseconds(3000)), kept);
    EXPECT_EQ(a.error, "") << piece;
    EXPECT_EQ(a.output, (CommandOutput{0, "", big, "a note\n"})) << piece;
    ASSERT_NE(kept.channel, nullptr);
    EXPECT_EQ(kept.pending, hello_frame("n0") + beat) << piece;
    EXPECT_EQ(kept.command, kProbe);
    EXPECT_EQ(connector.host("n0").commands, std::vector<std::string>{kProbe});
    EXPECT_EQ(connector.host("n0").remotes.at(0)->written(),
              ssh::encode_frame(FrameType::kInventory, 0, {}));
    EXPECT_FALSE(connector.host("n0").remotes.at(0)->closed());
  }
}

// An agent that cannot probe its host, a command that ends before it answers (a login shell
// that fails, an agent too old for the request) and one that prints what is not the agent's
// frames (a login script) give the output ddlrun judges as a probe's; the last two close the
// session.
TEST(AskAgent, AFailedAnswerOrACommandThatIsNoAgentIsJudgedAsAProbe) {
  FakeConnector connector;
  asked_agent(connector, ssh::encode_frame(FrameType::kInventory, 1, "hwloc failed"));
  ssh::AgentTree::Kept kept;
  EXPECT_EQ(ask_one(connector, "n0", timed(milliseconds(3000)), kept).output,
            (CommandOutput{1, "", "", "ddlrun: error: hwloc failed\n"}));
  connector.host("n1").program = [](FakeRemote& r) {
    r.print("ddlrun: unknown option --probe-agent\n", ddl::ssh::Stream::kStderr);
    r.end(2);
  };
  EXPECT_EQ(ask_one(connector, "n1", timed(milliseconds(3000)), kept).output,
            (CommandOutput{2, "", "", "ddlrun: unknown option --probe-agent\n"}));
  EXPECT_EQ(kept.session, nullptr);
  EXPECT_EQ(connector.host("n1").sessions_open, 0);
  connector.host("n2").program = [](FakeRemote& r) { r.print("Welcome to n2!\n"); };
  EXPECT_EQ(ask_one(connector, "n2", timed(milliseconds(3000)), kept).output,
            (CommandOutput{0, "", "Welcome to n2!\n", ""}));
  EXPECT_EQ(kept.session, nullptr);
  EXPECT_EQ(connector.host("n2").sessions_open, 0);
}

// A host that cannot be logged in to, or whose agent never answers, gives why, and nothing is
// kept.
TEST(AskAgent, ALoginThatFailsOrNoAnswerSaysWhy) {
  FakeConnector connector;
  connector.host("n0").refuse = "connection refused (10.200.3.2:22)";
  ssh::AgentTree::Kept kept;
  const ssh::AgentAnswer refused = ask_one(connector, "n0", timed(milliseconds(3000)), kept);
  EXPECT_EQ(refused.output, std::nullopt);
  EXPECT_EQ(refused.error, "connection refused (10.200.3.2:22)");
  connector.host("n1").exec_error = "channel open refused";
  EXPECT_EQ(ask_one(connector, "n1", timed(milliseconds(3000)), kept).error,
            "cannot run '/x/ddlrun --probe-agent' on n1:22: channel open refused");
  const ssh::AgentAnswer silent = ask_one(connector, "n2", timed(milliseconds(200)), kept);
  EXPECT_EQ(silent.output, std::nullopt);
  EXPECT_EQ(silent.error,
            "timed out after 0.2 s waiting for '/x/ddlrun --probe-agent' to print the inventory");
  EXPECT_EQ(kept.session, nullptr);
  EXPECT_EQ(connector.host("n2").sessions_open, 0);
}

/// Fake agents that answer their inventory request `delay` after it came, each from a thread
/// of its own (joined when this goes, before the connector that holds their remote ends).
class LateAgents {
 public:
  explicit LateAgents(milliseconds delay) : delay_(delay) {}
  ~LateAgents() {
    for (std::thread& t : threads_)
      t.join();
  }
  std::function<void(FakeRemote&)> program() {
    return [this](FakeRemote& r) {
      r.on_write([this](FakeRemote& remote, std::string_view) {
        std::lock_guard lock(mutex_);
        threads_.emplace_back([this, &remote] {
          std::this_thread::sleep_for(delay_);
          remote.print(inventory_answer());
        });
      });
    };
  }

 private:
  milliseconds delay_;
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

// A slow agent (a login shell that sleeps) holds no thread: 24 hosts whose agents answer 1 s
// after they are asked, at most 4 logins at once, all answer within about that second (a
// thread waiting on each would take six).
TEST(AskAgent, SlowAgentsAreReadTogether) {
  FakeConnector connector;
  LateAgents late(milliseconds(1000));
  std::vector<std::string> hosts;
  for (int i = 0; i < 24; ++i) {
    hosts.push_back("n" + std::to_string(i));
    connector.host(hosts.back()).program = late.program();
  }
  ddl::ssh::Options o = timed(milliseconds(5000));
  o.max_parallel = 4;
  ssh::AgentTree agents;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ssh::AgentAnswer> got = ssh::ask_agents(connector, hosts, o, kProbe, agents);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1800));
  ASSERT_EQ(got.size(), 24u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output, (CommandOutput{0, "", kInventory, ""})) << hosts[i];
    EXPECT_NE(agents.take(hosts[i]).channel, nullptr) << hosts[i];
  }
}

// An agent that answered waits in `agents` at once, where ddlrun's heartbeat reaches it
// (KeptSessions::keep_alive), while the others are still asked: a slow host never keeps it
// from hearing ddlrun for its heartbeat deadline.
TEST(AskAgent, AnAnsweredAgentIsKeptAtOnce) {
  FakeConnector connector;
  LateAgents late(milliseconds(1000));
  asked_agent(connector, inventory_answer());
  connector.host("n1").program = late.program();
  std::atomic<int> beats{0};
  ssh::AgentTree agents;
  agents.keep_alive([&](ssh::AgentTree::Kept&) { ++beats; }, milliseconds(100));
  const std::vector<ssh::AgentAnswer> got =
      ssh::ask_agents(connector, {"n0", "n1"}, timed(milliseconds(5000)), kProbe, agents);
  EXPECT_GE(beats.load(), 5);
  EXPECT_EQ(got.at(1).output, (CommandOutput{0, "", kInventory, ""}));
  EXPECT_EQ(agents.size(), 2u);
}

/// A first-level host n0 whose probe left its agent running on a kept channel; `agent` plays
/// what the hosts below send up once the subtree frame came.
ssh::AgentTree::Kept kept_agent(FakeConnector& connector, std::function<void(FakeRemote&)> agent) {
  connector.host("n0").program = [agent](FakeRemote& r) {
    r.on_write([agent, sent = false](FakeRemote& remote, std::string_view) mutable {
      if (!std::exchange(sent, true)) agent(remote);
    });
  };
  ssh::AgentTree::Kept kept;
  kept.session = connector.connect("n0", {});
  kept.channel = kept.session->exec(kProbe);
  kept.pending = hello_frame("n0");
  kept.command = kProbe;
  return kept;
}

std::string output_of(int host, const CommandOutput& o) {
  return ssh::route(host, ssh::encode_frame(FrameType::kOutput, 0, ssh::encode(o)));
}

std::string answer_of(int host) {
  return ssh::route(host, inventory_answer());
}

TEST(StartSubtree, CollectsEachOutputKeepsTheRestAndNamesFailures) {
  FakeConnector connector;
  const CommandOutput inv{0, "", kInventory, ""};
  ssh::AgentTree::Kept kept = kept_agent(connector, [&](FakeRemote& r) {
    r.print(ssh::route(1, hello_frame("n1")) + answer_of(1) + ssh::route(2, hello_frame("n2")) +
            answer_of(3) +
            ssh::route(4, ssh::encode_frame(FrameType::kFailure, 1,
                                            "connection refused (10.0.0.4:22) (from n1, its "
                                            "parent in the launch tree)")));
  });
  ssh::SubtreeFrame w;
  w.ddlrun_path = "/x/ddlrun";
  // n2's inventory is known (no command): only its agent starts.
  w.children = {
      {1, "n1", {{3, "n3", {}, kProbe}, {4, "n4", {{5, "n5", {}, kProbe}}, kProbe}}, kProbe},
      {2, "n2", {}, {}}};
  const std::vector<ssh::StartedHost> got = ssh::start_subtree(kept, "n0", w, milliseconds(3000));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], (ssh::StartedHost{1, "n1", "n0", inv, ""}));
  EXPECT_EQ(got[1], (ssh::StartedHost{3, "n3", "n1", inv, ""}));
  EXPECT_EQ(got[2],
            (ssh::StartedHost{4, "n4", "n1", std::nullopt,
                              "connection refused (10.0.0.4:22) (from n1, its parent in the "
                              "launch tree)"}));
  EXPECT_EQ(got[3], (ssh::StartedHost{5, "n5", "n4", std::nullopt,
                                      "not reached: n4, above it in the launch tree, failed"}));
  // The launch gets the hellos, n0's own first, and knows the subtree is started.
  const std::vector<ssh::Frame> rest = frames(kept.pending);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].type, FrameType::kHello);
  EXPECT_EQ(from(rest, 1).at(0).type, FrameType::kHello);
  EXPECT_EQ(from(rest, 2).at(0).type, FrameType::kHello);
  EXPECT_EQ(kept.subtree, ssh::encode(w));
  ASSERT_NE(kept.channel, nullptr);
  const std::vector<ssh::Frame> written = frames(connector.host("n0").remotes.at(0)->written());
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written[0].type, FrameType::kSubtree);
  EXPECT_EQ(ssh::decode_subtree(written[0].payload).children, w.children);
  // Then an inventory request routed to each host with a command, in the tree's order.
  std::vector<int> asked;
  for (const ssh::Frame& f : written) {
    if (f.type != FrameType::kRouted) continue;
    ASSERT_EQ(frames(f.payload).at(0).type, FrameType::kInventory);
    asked.push_back(f.id);
  }
  EXPECT_EQ(asked, (std::vector<int>{1, 3, 4, 5}));
}

// An agent that cannot probe its host answers why (Hw, id 1): ddlrun reads it as a probe that
// failed with that on its stderr.
TEST(StartSubtree, AnAgentThatCannotProbeItsHostIsAFailedProbe) {
  FakeConnector connector;
  ssh::AgentTree::Kept kept = kept_agent(connector, [&](FakeRemote& r) {
    r.print(ssh::route(
        1, hello_frame("n1") + ssh::encode_frame(FrameType::kInventory, 1, "hwloc failed")));
  });
  ssh::SubtreeFrame w;
  w.children = {{1, "n1", {}, kProbe}};
  const std::vector<ssh::StartedHost> got = ssh::start_subtree(kept, "n0", w, milliseconds(3000));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0],
            (ssh::StartedHost{1, "n1", "n0",
                              CommandOutput{1, "", "", "ddlrun: error: hwloc failed\n"}, ""}));
}

// Between the probe and the launch ddlrun beats each kept agent (keep_agents_alive): a
// heartbeat frame down when the remote window takes it whole, and what the agent sent read
// into pending after what was there, without blocking; nothing for a closed or absent channel.
TEST(BeatKept, SendsAHeartbeatAndKeepsWhatTheAgentSent) {
  FakeConnector connector;
  ssh::AgentTree::Kept kept =
      kept_agent(connector, [](FakeRemote& r) { r.print(ssh::route(1, hello_frame("n1"))); });
  std::shared_ptr<FakeRemote> remote = connector.host("n0").remotes.at(0);
  ssh::beat_kept(kept);
  const std::string beat = ssh::encode_frame(FrameType::kHeartbeat, 0, {});
  EXPECT_EQ(remote->written(), beat);
  for (int i = 0; i < 100 && frames(kept.pending).size() < 2; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    ssh::beat_kept(kept);
  }
  const std::vector<ssh::Frame> got = frames(kept.pending);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].type, FrameType::kHello);  // n0's, there before
  EXPECT_EQ(got[1].type, FrameType::kRouted);
  // A window too small for a whole frame: nothing is written (a frame is never cut).
  remote->set_window(static_cast<uint32_t>(beat.size() - 1));
  const std::string before = remote->written();
  ssh::beat_kept(kept);
  EXPECT_EQ(remote->written(), before);
  // No channel (the probe command ran alone): nothing to do.
  ssh::AgentTree::Kept bare;
  bare.session = connector.connect("n0", {});
  ssh::beat_kept(bare);
  EXPECT_EQ(bare.pending, "");
}

// An interior host whose probe ended in failure (its login shell exited 3) starts no agent:
// the hosts below it are not reached at once, not waited for until the limit.
TEST(StartSubtree, AnInteriorCommandThatFailedLeavesItsSubtreeUnreached) {
  FakeConnector connector;
  const CommandOutput failed{3, "", "", "broken login\n"};
  ssh::AgentTree::Kept kept =
      kept_agent(connector, [&](FakeRemote& r) { r.print(output_of(1, failed)); });
  ssh::SubtreeFrame w;
  w.children = {{1, "n1", {{2, "n2", {{3, "n3", {}, kProbe}}, kProbe}}, kProbe}};
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ssh::StartedHost> got = ssh::start_subtree(kept, "n0", w, milliseconds(20000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (ssh::StartedHost{1, "n1", "n0", failed, ""}));
  EXPECT_EQ(got[1], (ssh::StartedHost{2, "n2", "n1", std::nullopt,
                                      "not reached: n1, above it in the launch tree, failed"}));
  EXPECT_EQ(got[2], (ssh::StartedHost{3, "n3", "n2", std::nullopt,
                                      "not reached: n1, above it in the launch tree, failed"}));
}

// A routed frame whose payload ends inside a frame is a protocol error of the first level's
// agent (ddlrun names that host and leaves its subtree unreached), not a frame dropped.
TEST(StartSubtree, ARoutedFrameEndingInsideAFrameIsAProtocolError) {
  FakeConnector connector;
  ssh::AgentTree::Kept kept = kept_agent(connector, [&](FakeRemote& r) {
    const std::string hello = hello_frame("n1");
    r.print(ssh::route(1, hello + hello.substr(0, hello.size() - 1)));
  });
  ssh::SubtreeFrame w;
  w.children = {{1, "n1", {}, kProbe}};
  try {
    ssh::start_subtree(kept, "n0", w, milliseconds(3000));
    ADD_FAILURE() << "a partial frame passed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "a routed frame ends inside a frame");
  }
}

TEST(StartSubtree, SilenceAndAClosedChannelFailWhatIsLeft) {
  ssh::SubtreeFrame w;
  w.children = {{1, "n1", {{3, "n3", {}, kProbe}}, kProbe}, {2, "n2", {}, kProbe}};
  {
    FakeConnector connector;
    ssh::AgentTree::Kept kept = kept_agent(connector, [](FakeRemote& r) {
      r.print(output_of(1, {0, "", "x", ""}));
    });
    const std::vector<ssh::StartedHost> got = ssh::start_subtree(kept, "n0", w, milliseconds(300));
    ASSERT_EQ(got.size(), 3u);
    EXPECT_TRUE(got[0].output);
    EXPECT_EQ(got[1].error, "no answer within 0.3 s (from n1, its parent in the launch tree)");
    EXPECT_EQ(got[2].error, "no answer within 0.3 s (from n0, its parent in the launch tree)");
  }
  {
    FakeConnector connector;
    ssh::AgentTree::Kept kept = kept_agent(connector, [](FakeRemote& r) { r.end(1); });
    const std::vector<ssh::StartedHost> got = ssh::start_subtree(kept, "n0", w, milliseconds(3000));
    ASSERT_EQ(got.size(), 3u);
    for (const ssh::StartedHost& s : got)
      EXPECT_EQ(s.error, "not reached: n0, above it in the launch tree, failed") << s.name;
    EXPECT_EQ(kept.channel, nullptr);  // the launch runs its agent again
    EXPECT_TRUE(kept.subtree.empty());
  }
}

/// n0 kept as the probe left it (its agent said hello), played by `program`, and a thread
/// that beats up its channel every 50 ms while it lives, as its agent does.
struct BeatingAgent {
  FakeConnector connector;
  ssh::AgentTree::Kept kept;
  std::shared_ptr<FakeRemote> remote;
  std::atomic<bool> done{false};
  std::thread beats;

  BeatingAgent(std::function<void(FakeRemote&)> program, bool beating) {
    connector.host("n0").program = std::move(program);
    kept.session = connector.connect("n0", {});
    kept.channel = kept.session->exec(kProbe);
    kept.pending = hello_frame("n0");
    kept.command = kProbe;
    remote = connector.host("n0").remotes.at(0);
    if (!beating) return;
    beats = std::thread([this] {
      for (; !done; std::this_thread::sleep_for(milliseconds(50)))
        remote->print(ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
    });
  }
  ~BeatingAgent() {
    done = true;
    if (beats.joinable()) beats.join();
  }
};

// The first-level host's socket takes nothing (cut off without a RST, while its
// agent still beats): it is lost within the heartbeat deadline in the launch's words, not
// waited for until the limit (minutes); its channel and session close without waiting (a
// write made anyway would wait 1.5 s), and the hosts below are not reached. A silent one is
// lost the same way. Before, both waited for the limit.
TEST(StartSubtree, AFirstLevelThatTakesNoDataOrFallsSilentIsLostInTheLaunchsWords) {
  ssh::SubtreeFrame w;
  w.heartbeat_timeout = milliseconds(1000);
  w.children = {{1, "n1", {{2, "n2", {}, kProbe}}, kProbe}};
  const std::string none = "not reached: n0, above it in the launch tree, failed";
  {
    BeatingAgent a([](FakeRemote& r) { r.jam(milliseconds(1500)); }, true);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<ssh::StartedHost> got =
        ssh::start_subtree(a.kept, "n0", w, milliseconds(20000));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].error, none);
    EXPECT_EQ(got[1].error, none);
    EXPECT_TRUE(std::regex_match(
        a.kept.lost, std::regex(R"(took no data for 1 s \([0-9]+ bytes wait for it: the host )"
                                R"(is unreachable, or its agent is stopped or hung\))")))
        << a.kept.lost;
    EXPECT_EQ(a.kept.channel, nullptr);
    EXPECT_EQ(a.kept.session, nullptr);
    EXPECT_TRUE(a.kept.subtree.empty());
    EXPECT_TRUE(a.connector.host("n0").stopped_blocking);
    EXPECT_EQ(a.connector.host("n0").sessions_open, 0);
    EXPECT_EQ(a.remote->written(), "");  // no write waited for the jammed socket
  }
  {
    BeatingAgent a([](FakeRemote&) {}, false);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<ssh::StartedHost> got =
        ssh::start_subtree(a.kept, "n0", w, milliseconds(20000));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].error, none);
    EXPECT_EQ(a.kept.lost,
              "no heartbeat for 1 s (the host is unreachable, or its agent is stopped or hung)");
    EXPECT_EQ(a.kept.channel, nullptr);
  }
}

}  // namespace
}  // namespace ddl::launcher
