// One agent's channel as the host above it drives it (launcher/ssh/agent_link.h), through the
// recording ssh double (tests/ssh/fake_ssh.h): what goes down and in which order, what it
// reads first, when the launch's rules start, and why a channel ended, in exact words.

#include "launcher/ssh/agent_link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "launcher/ssh/tree.h"
#include "tests/launcher/ssh_frames.h"
#include "tests/ssh/fake_ssh.h"

namespace ddl::launcher {
namespace {

using ddl::ssh::FakeConnector;
using ddl::ssh::FakeRemote;
using ssh::FrameType;
using std::chrono::milliseconds;

constexpr const char* kAgent = "/opt/ddlrun/bin/ddlrun --agent";

/// A link to node1's agent, with `pending` already sent by it.
std::unique_ptr<ssh::AgentLink> link_to(FakeConnector& connector, const std::string& pending = {}) {
  connector.host("node1").program = [](FakeRemote&) {};
  ssh::AgentTree::Kept kept;
  kept.session = connector.connect("node1", {});
  kept.channel = kept.session->exec(kAgent);
  kept.command = kAgent;
  kept.pending = pending;
  return std::make_unique<ssh::AgentLink>(std::move(kept));
}

FakeRemote& remote(FakeConnector& connector) {
  return *connector.host("node1").remotes.at(0);
}

TEST(AgentLink, ReadsWhatItsAgentSentBeforeAndSendsAHeartbeatAtOnce) {
  FakeConnector connector;
  auto link = link_to(connector, test::hello_frame("node1"));
  remote(connector).print(ssh::encode_frame(FrameType::kReady, 0, {}));
  const std::string job = ssh::encode_frame(FrameType::kGo, 0, {});
  link->send(job);
  EXPECT_TRUE(link->turn(milliseconds(0)));
  EXPECT_TRUE(link->heard());
  EXPECT_EQ(remote(connector).written(), job + ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
  EXPECT_EQ(link->next()->type, FrameType::kHello);  // the pending bytes first
  EXPECT_EQ(link->next()->type, FrameType::kReady);
  EXPECT_FALSE(link->next());
  EXPECT_TRUE(link->turn(milliseconds(0)));  // no second heartbeat within the second
  EXPECT_FALSE(link->heard());
  EXPECT_EQ(remote(connector).written(), job + ssh::encode_frame(FrameType::kHeartbeat, 0, {}));
}

TEST(AgentLink, SilenceLosesItOnlyAfterItsHello) {
  FakeConnector connector;
  auto link = link_to(connector);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(link->lost_why(milliseconds(5)), "");  // a login may take its time
  link->said_hello();
  EXPECT_EQ(link->lost_why(milliseconds(5)), ssh::no_heartbeat_text(milliseconds(5)));
  link->excuse();  // the caller held it up: that time does not count
  EXPECT_EQ(link->silence(milliseconds(1000)), "");
}

TEST(AgentLink, ClosedBeforeItsHelloNamesTheExitStatus) {
  FakeConnector connector;
  auto link = link_to(connector);
  remote(connector).end(127);
  EXPECT_FALSE(link->turn(milliseconds(0)));
  EXPECT_EQ(link->closed_reason("/opt/ddlrun/bin/ddlrun"),
            "'/opt/ddlrun/bin/ddlrun --agent' exited before it said hello (exit status 127: "
            "ddlrun is not installed at /opt/ddlrun/bin/ddlrun there)");
}

TEST(AgentLink, ClosedAfterItsHelloSaysWhatItsAgentLastSaid) {
  FakeConnector connector;
  auto link = link_to(connector);
  link->said_hello();
  remote(connector).print("note\ncannot go on", ddl::ssh::Stream::kStderr);
  remote(connector).end(1);
  EXPECT_FALSE(link->turn(milliseconds(0)));
  link->read_stderr();
  EXPECT_EQ(link->take_line(), "note\n");
  EXPECT_EQ(link->take_line(), "");  // not a whole line
  EXPECT_EQ(link->closed_reason("ddlrun"), "the connection to its agent closed (cannot go on)");
}

TEST(AgentLink, AFailedWriteIsALostConnectionAndNoStall) {
  FakeConnector connector;
  auto link = link_to(connector);
  link->said_hello();
  remote(connector).fail_writes();
  link->send("x");
  link->turn(milliseconds(0));
  EXPECT_TRUE(link->write_failed());
  EXPECT_EQ(link->stall(milliseconds(0)), "");
  EXPECT_EQ(link->closed_reason("ddlrun").rfind("lost the connection to node1:22", 0), 0u);
}

TEST(AgentLink, ReleaseGivesTheSessionBackWithWhatWasNotReadAfterTheKeptFrames) {
  FakeConnector connector;
  const std::string ready = ssh::encode_frame(FrameType::kReady, 0, {});
  auto link = link_to(connector, ready + ready.substr(0, 3));
  EXPECT_EQ(link->next()->type, FrameType::kReady);
  ssh::AgentTree::Kept kept = link->release("K");
  EXPECT_EQ(kept.pending, "K" + ready.substr(0, 3));
  EXPECT_NE(kept.session, nullptr);
  EXPECT_NE(kept.channel, nullptr);
}

}  // namespace
}  // namespace ddl::launcher
