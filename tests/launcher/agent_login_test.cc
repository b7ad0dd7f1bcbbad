// Asking agents whose login fails, through the real ssh client (launcher/ssh/agent_tree.h:
// ask_agents over ssh::libssh_connector(), no ssh server needed): a name that does not resolve,
// a refused connection, the ssh config's HostName and Port and the options that override them, a
// missing config file, a server that never greets, one that is not ssh (no descriptor leaks), and
// many failing hosts at once; each with its exact reason, and no session kept.

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "launcher/ssh/agent_tree.h"
#include "tests/lib/temp_dir.h"

namespace ddl::launcher {
namespace {

using ddl::testing::TempDir;
using std::chrono::milliseconds;

constexpr const char* kAgent = "/opt/ddlrun/bin/ddlrun --probe-agent";

/// A TCP socket on 127.0.0.1, bound to a free port; listening when asked.
class LocalPort {
 public:
  explicit LocalPort(bool listening) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (listening) {
      EXPECT_EQ(listen(fd_, 8), 0);
    }
  }
  ~LocalPort() { close(fd_); }
  int fd() const { return fd_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

/// Options that read no user or system ssh config: an empty one in `dir`.
ddl::ssh::Options local_options(const TempDir& dir) {
  ddl::ssh::Options o;
  o.ssh_config = dir.write("ssh_config", "");
  o.known_hosts = dir.path() + "/known_hosts";
  o.connect_timeout = milliseconds(2000);
  return o;
}

int open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr)
    ++n;
  closedir(d);
  return n;
}

/// Each host's reason from ask_agents over libssh, checking that none was kept.
std::vector<std::string> reasons(const std::vector<std::string>& hosts,
                                 const ddl::ssh::Options& o) {
  ssh::AgentTree agents;
  std::vector<std::string> out;
  for (const ssh::AgentAnswer& a :
       ssh::ask_agents(ddl::ssh::libssh_connector(), hosts, o, kAgent, agents)) {
    EXPECT_EQ(a.output, std::nullopt);
    out.push_back(a.error);
  }
  for (const std::string& h : hosts)
    EXPECT_EQ(agents.take(h).session, nullptr) << h;
  return out;
}

/// The reason asking `host`'s agent gives.
std::string reason_of(const std::string& host, const ddl::ssh::Options& o) {
  return reasons({host}, o).at(0);
}

TEST(AgentLogin, NameThatDoesNotResolve) {
  const TempDir dir;
  EXPECT_EQ(reason_of("nosuch.invalid", local_options(dir)),
            "cannot resolve host name 'nosuch.invalid': Name or service not known");
}

TEST(AgentLogin, ConnectionRefused) {
  const TempDir dir;
  const LocalPort closed(false);  // bound, not listening: connecting is refused
  ddl::ssh::Options o = local_options(dir);
  o.port = closed.port();
  EXPECT_EQ(reason_of("127.0.0.1", o),
            "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
}

TEST(AgentLogin, ConfigGivesHostNameAndPortOptionsOverride) {
  const TempDir dir;
  const LocalPort closed(false);
  const LocalPort other(false);
  ddl::ssh::Options o = local_options(dir);
  o.ssh_config = dir.write("config", "Host node9\n  HostName 127.0.0.1\n  Port " +
                                         std::to_string(closed.port()) + "\n  User nobody\n");
  EXPECT_EQ(reason_of("node9", o),
            "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
  o.port = other.port();
  EXPECT_EQ(reason_of("node9", o),
            "connection refused (127.0.0.1:" + std::to_string(other.port()) + ")");
}

TEST(AgentLogin, MissingConfigFile) {
  const TempDir dir;
  ddl::ssh::Options o = local_options(dir);
  o.ssh_config = dir.path() + "/no_such_config";
  EXPECT_EQ(reason_of("node1", o),
            "cannot read ssh config " + o.ssh_config + ": No such file or directory");
}

TEST(AgentLogin, ServerThatNeverGreetsTimesOut) {
  const TempDir dir;
  const LocalPort silent(true);  // the kernel accepts; nobody speaks
  ddl::ssh::Options o = local_options(dir);
  o.port = silent.port();
  o.connect_timeout = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  const std::string reason = reason_of("127.0.0.1", o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  EXPECT_EQ(reason, "timed out after 0.3 s waiting for the ssh server at 127.0.0.1:" +
                        std::to_string(silent.port()) + " to greet");
}

TEST(AgentLogin, ServerThatIsNotSshAndNoLeaks) {
  const TempDir dir;
  const LocalPort server(true);
  std::thread talker([fd = server.fd()] {
    for (int i = 0; i < 5; ++i) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
      (void)!write(c, reply, sizeof reply - 1);
      close(c);
    }
  });
  ddl::ssh::Options o = local_options(dir);
  o.port = server.port();
  const int before = open_fds();
  for (int i = 0; i < 5; ++i) {
    const std::string reason = reason_of("127.0.0.1", o);
    const std::string prefix =
        "ssh handshake with 127.0.0.1:" + std::to_string(server.port()) + " failed: ";
    EXPECT_EQ(reason.substr(0, prefix.size()), prefix) << reason;
  }
  talker.join();
  EXPECT_EQ(open_fds(), before);
}

TEST(AgentLogin, ManyFailingHostsAtOnce) {
  const TempDir dir;
  const LocalPort closed(false);
  ddl::ssh::Options o = local_options(dir);
  o.port = closed.port();
  std::vector<std::string> hosts = {"a.invalid", "b.invalid"};
  for (int i = 0; i < 30; ++i)
    hosts.push_back("127.0.0." + std::to_string(i + 1));
  const int before = open_fds();
  const std::vector<std::string> r = reasons(hosts, o);
  EXPECT_EQ(open_fds(), before);
  ASSERT_EQ(r.size(), hosts.size());
  EXPECT_EQ(r[0], "cannot resolve host name 'a.invalid': Name or service not known");
  EXPECT_EQ(r[2], "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
}

}  // namespace
}  // namespace ddl::launcher
