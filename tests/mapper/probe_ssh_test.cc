#include "mapper/probe_ssh.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/ssh/fake_ssh.h"

namespace ddl::mapper {
namespace {

using std::chrono::milliseconds;

/// A small inventory named `hostname`.
Inventory inventory_named(const std::string& hostname) {
  Inventory inv;
  inv.hostname = hostname;
  Package p;
  p.cores.push_back(Core{0, 0, {0, 1}});
  inv.packages.push_back(p);
  return inv;
}

/// The reason probing `host` gives, or "ok".
std::string reason_of(const std::string& host, const SshProbeOptions& o) {
  try {
    probe_host_ssh(host, o);
    return "ok";
  } catch (const ProbeError& e) {
    return e.what();
  }
}

std::string reason_of_output(const RemoteOutput& out,
                             const std::string& command = "/opt/ddlrun/bin/ddlrun-probe") {
  try {
    inventory_from_probe_output("node3", command, out);
    return "ok";
  } catch (const ProbeError& e) {
    return e.what();
  }
}

/// A fresh directory under the test's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "probe_ssh_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

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
SshProbeOptions local_options(const TempDir& dir) {
  SshProbeOptions o;
  o.probe_path = "/opt/ddlrun/bin/ddlrun-probe";
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

// --- the remote command ------------------------------------------------------------------------

TEST(ProbeCommand, IsTheProbePathQuotedWhenNeeded) {
  SshProbeOptions o;
  o.probe_path = "/opt/ddlrun/bin/ddlrun-probe";
  EXPECT_EQ(probe_command(o), "/opt/ddlrun/bin/ddlrun-probe");
  o.probe_path = "/home/a b/it's/ddlrun-probe";
  EXPECT_EQ(probe_command(o), "'/home/a b/it'\\''s/ddlrun-probe'");
  o.remote_command = "/x/ddlrun --probe";
  EXPECT_EQ(probe_command(o), "/x/ddlrun --probe");
}

TEST(ProbeOutput, ParsesTheInventory) {
  const Inventory inv = inventory_named("node3");
  RemoteOutput out;
  out.out = to_yaml(inv);
  out.err = "a warning on stderr is fine\n";
  EXPECT_EQ(inventory_from_probe_output("node3", "/p", out), inv);
}

TEST(ProbeOutput, NotInstalled) {
  RemoteOutput out;
  out.exit_status = 127;
  out.err = "bash: line 1: /opt/ddlrun/bin/ddlrun-probe: No such file or directory\n";
  EXPECT_EQ(reason_of_output(out),
            "ddlrun-probe is not installed at /opt/ddlrun/bin/ddlrun-probe on node3 (exit status "
            "127, \"bash: line 1: /opt/ddlrun/bin/ddlrun-probe: No such file or directory\"); "
            "install ddlrun there at the same path as here, or plan offline with --host-xml "
            "node3=FILE");
  out.err.clear();
  EXPECT_EQ(reason_of_output(out, "'/opt/dd lrun/bin/ddlrun' --probe"),
            "ddlrun is not installed at /opt/dd lrun/bin/ddlrun on node3 (exit status 127); "
            "install ddlrun there at the same path as here, or plan offline with --host-xml "
            "node3=FILE");
}

TEST(ProbeOutput, NotFoundInAWrapperIsAboutTheWrapper) {
  RemoteOutput out;
  out.exit_status = 127;
  out.err = "bash: line 1: module: command not found\n";
  EXPECT_EQ(reason_of_output(out, "module load ddlrun; ddlrun-probe"),
            "'module load ddlrun; ddlrun-probe' exited with status 127 (command not found); its "
            "stderr:\nbash: line 1: module: command not found");
}

TEST(ProbeOutput, NotExecutable) {
  RemoteOutput out;
  out.exit_status = 126;
  out.err = "sh: 1: /opt/ddlrun/bin/ddlrun-probe: Exec format error\n";
  EXPECT_EQ(reason_of_output(out),
            "/opt/ddlrun/bin/ddlrun-probe cannot be run on node3 (exit status 126, \"sh: 1: "
            "/opt/ddlrun/bin/ddlrun-probe: Exec format error\"); install a ddlrun built for that "
            "host at the same path as here, or plan offline with --host-xml node3=FILE");
}

TEST(ProbeOutput, FailedCommandGivesStatusAndFirstLinesOfStderr) {
  RemoteOutput out;
  out.exit_status = 1;
  out.err =
      "\nddlrun-probe: error: cannot load topology\n  \nline 2\r\nline 3\nline 4\nline 5\n"
      "line 6\n";
  EXPECT_EQ(reason_of_output(out),
            "'/opt/ddlrun/bin/ddlrun-probe' exited with status 1; its stderr:\n"
            "ddlrun-probe: error: cannot load topology\nline 2\nline 3\nline 4\nline 5");
  out.err = std::string(300, 'x');
  EXPECT_EQ(reason_of_output(out),
            "'/opt/ddlrun/bin/ddlrun-probe' exited with status 1; its "
            "stderr:\n" +
                std::string(200, 'x') + "...");
  out.err = "\n \n";
  EXPECT_EQ(reason_of_output(out),
            "'/opt/ddlrun/bin/ddlrun-probe' exited with status 1 and "
            "printed nothing on stderr");
}

TEST(ProbeOutput, KilledOrNoStatus) {
  RemoteOutput out;
  out.exit_status = -1;
  out.signal = "KILL";
  EXPECT_EQ(reason_of_output(out),
            "'/opt/ddlrun/bin/ddlrun-probe' was killed by signal KILL and "
            "printed nothing on stderr");
  out.signal.clear();
  out.err = "Killed\n";
  EXPECT_EQ(reason_of_output(out),
            "'/opt/ddlrun/bin/ddlrun-probe' ended without an exit status; "
            "its stderr:\nKilled");
}

// A login script that prints on stdout was "not an inventory ... not valid YAML".
TEST(ProbeOutput, OutputBeforeTheInventoryIsALoginScript) {
  RemoteOutput out;
  out.out = "Welcome to \"node3\"!\n\x1b[0m\nversion: 1\nhostname: \"node3\"\n";
  EXPECT_EQ(reason_of_output(out),
            "something prints on its standard output before the inventory, \"Welcome to "
            "\\\"node3\\\"!\\n\\x1b[0m\\n\" (a login script such as ~/.bashrc?); make it print "
            "nothing when the shell is not interactive, or print on stderr");
}

TEST(ProbeOutput, UnparseableOutputGivesTheInventoryError) {
  RemoteOutput out;
  out.out = "version: 1\nhostname: [\n";
  std::string inventory_error;
  try {
    inventory_from_yaml(out.out, "inventory of node3");
  } catch (const InventoryError& e) {
    inventory_error = e.what();
  }
  ASSERT_FALSE(inventory_error.empty());
  EXPECT_EQ(reason_of_output(out), "its output is not an inventory: " + inventory_error);
  out.out.clear();
  EXPECT_NE(reason_of_output(out).find("its output is not an inventory: inventory of node3"),
            std::string::npos);
}

// --- the report ----------------------------------------------------------------------------------

TEST(ProbeFailures, AllInOneMessage) {
  std::vector<HostProbe> results;
  for (int i = 1; i <= 18; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "node%02d", i);
    results.push_back(HostProbe{name, inventory_named(name), "", false});
  }
  results[2].inventory.reset();
  results[2].error = "connection refused (10.200.3.2:22)";
  results[6].inventory.reset();
  results[6].error = "'/p' exited with status 1; its stderr:\nline 1\nline 2";
  EXPECT_EQ(
      format_probe_failures(results),
      "cannot probe 2 of 18 hosts:\n"
      "  node03: connection refused (10.200.3.2:22)\n"
      "  node07: '/p' exited with status 1; its stderr:\n"
      "      line 1\n"
      "      line 2\n"
      "fix them (each must pass 'ssh -o BatchMode=yes HOST true', printing nothing), leave them "
      "out of the host list, or plan offline with --host-xml HOST=FILE (FILE from 'lstopo --of xml "
      "FILE' on "
      "that host)\n");
}

TEST(ProbeFailures, NoneIsEmptyAndRepeatsCountOnce) {
  std::vector<HostProbe> results = {{"a", inventory_named("a"), "", false}};
  EXPECT_EQ(format_probe_failures(results), "");
  EXPECT_EQ(format_probe_failures({}), "");
  results = {{"a", std::nullopt, "connection refused (10.0.0.1:22)", false},
             {"a", std::nullopt, "connection refused (10.0.0.1:22)", false}};
  const std::string text = format_probe_failures(results);
  EXPECT_EQ(text.substr(0, text.find('\n', text.find('\n') + 1) + 1),
            "cannot probe 1 of 1 host:\n  a: connection refused (10.0.0.1:22)\n");
}

// --- many hosts, with a fake probe --------------------------------------------------------------

TEST(RemoteProber, ProbesEachDistinctHostOnceAndKeepsOrder) {
  std::atomic<int> calls{0};
  RemoteProber prober(SshProbeOptions{}, [&](const std::string& host) {
    ++calls;
    if (host == "bad") throw ProbeError("connection refused (10.0.0.9:22)");
    if (host == "weird") throw std::runtime_error("boom");
    return inventory_named(host);
  });
  const std::vector<std::string> hosts = {"b", "a", "bad", "b", "weird", "a"};
  std::vector<HostProbe> r = prober.probe(hosts);
  EXPECT_EQ(calls, 4);
  ASSERT_EQ(r.size(), 6u);
  for (size_t i = 0; i < r.size(); ++i)
    EXPECT_EQ(r[i].host, hosts[i]);
  EXPECT_EQ(r[0].inventory->hostname, "b");
  EXPECT_EQ(r[1].inventory->hostname, "a");
  EXPECT_FALSE(r[2].ok());
  EXPECT_EQ(r[2].error, "connection refused (10.0.0.9:22)");
  EXPECT_EQ(r[4].error, "internal error: boom (please report this)");
  EXPECT_FALSE(r[0].cached);

  // A later call of the same run reuses what worked and tries the failures again.
  const std::vector<std::string> again = {"a", "bad", "c"};
  r = prober.probe(again);
  EXPECT_EQ(calls, 6);
  EXPECT_TRUE(r[0].cached);
  EXPECT_FALSE(r[1].ok());
  EXPECT_FALSE(r[2].cached);
  EXPECT_EQ(format_probe_failures(r).substr(0, 27), "cannot probe 1 of 3 hosts:\n");
}

TEST(RemoteProber, RunsAtMostMaxParallelAtOnce) {
  SshProbeOptions o;
  o.max_parallel = 3;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  RemoteProber prober(o, [&](const std::string& host) {
    const int now = ++running;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(milliseconds(20));
    --running;
    return inventory_named(host);
  });
  std::vector<std::string> hosts;
  for (int i = 0; i < 20; ++i)
    hosts.push_back("n" + std::to_string(i));
  const std::vector<HostProbe> r = prober.probe(hosts);
  EXPECT_EQ(most, 3);
  for (const HostProbe& p : r)
    EXPECT_TRUE(p.ok());
}

// --- the disk cache ------------------------------------------------------------------------------

TEST(ProbeCache, PathEscapesOddCharacters) {
  EXPECT_EQ(probe_cache_path("/c", "1234", "node01.cluster"), "/c/1234/node01.cluster.yaml");
  EXPECT_EQ(probe_cache_path("/c", "12[3]", "fe80::1"), "/c/12%5B3%5D/fe80::1.yaml");
  EXPECT_EQ(probe_cache_path("/c", "..", "a/b"), "/c/%2E./a%2Fb.yaml");
}

TEST(ProbeCache, DefaultDirFollowsXdg) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::optional<std::string> old_xdg = xdg ? std::optional<std::string>(xdg) : std::nullopt;
  const std::optional<std::string> old_home =
      home ? std::optional<std::string>(home) : std::nullopt;
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_probe_cache_dir(), "/xdg/ddlrun/probe");
  setenv("XDG_CACHE_HOME", "relative", 1);  // ignored, as the XDG spec says
  EXPECT_EQ(default_probe_cache_dir(), "/home/u/.cache/ddlrun/probe");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_probe_cache_dir(), "/home/u/.cache/ddlrun/probe");
  unsetenv("HOME");
  EXPECT_EQ(default_probe_cache_dir(), "");
  if (old_xdg) setenv("XDG_CACHE_HOME", old_xdg->c_str(), 1);
  if (old_home) setenv("HOME", old_home->c_str(), 1);
}

TEST(ProbeCache, WritesPrivateFilesAndReadsThemBack) {
  const TempDir dir;
  SshProbeOptions o;
  o.job_id = "4242";
  o.cache_dir = dir.path() + "/cache/ddlrun";
  int calls = 0;
  const std::vector<std::string> hosts = {"n1", "n2"};
  {
    RemoteProber prober(o, [&](const std::string& host) {
      ++calls;
      if (host == "n2") throw ProbeError("connection refused (10.0.0.2:22)");
      return inventory_named(host);
    });
    prober.probe(hosts);
  }
  EXPECT_EQ(calls, 2);
  const std::string file = probe_cache_path(o.cache_dir, "4242", "n1");
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((o.cache_dir + "/4242").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(std::filesystem::exists(probe_cache_path(o.cache_dir, "4242", "n2")));

  // A later ddlrun of the same job: n1 from the disk, n2 probed.
  RemoteProber later(o, [&](const std::string& host) {
    ++calls;
    return inventory_named(host + "-probed");
  });
  std::vector<HostProbe> r = later.probe(hosts);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(r[0].cached);
  EXPECT_EQ(r[0].inventory, inventory_named("n1"));
  EXPECT_FALSE(r[1].cached);
  EXPECT_EQ(r[1].inventory->hostname, "n2-probed");

  // A damaged cache file is probed again and replaced.
  std::ofstream(file) << "garbage: [";
  RemoteProber third(o, [&](const std::string& host) {
    ++calls;
    return inventory_named(host + "-again");
  });
  r = third.probe(hosts);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(r[0].inventory->hostname, "n1-again");
  EXPECT_EQ(r[1].inventory->hostname, "n2-probed");
}

TEST(ProbeCache, NoJobIdNoFiles) {
  const TempDir dir;
  SshProbeOptions o;
  o.cache_dir = dir.path() + "/cache";
  RemoteProber prober(o, [](const std::string& host) { return inventory_named(host); });
  const std::vector<std::string> hosts = {"n1"};
  EXPECT_TRUE(prober.probe(hosts)[0].ok());
  EXPECT_FALSE(std::filesystem::exists(o.cache_dir));
}

TEST(ProbeCache, UnusableCacheDirIsSkipped) {
  const TempDir dir;
  SshProbeOptions o;
  o.job_id = "7";
  o.cache_dir = dir.write("a_file", "not a directory");
  RemoteProber prober(o, [](const std::string& host) { return inventory_named(host); });
  const std::vector<std::string> hosts = {"n1"};
  EXPECT_TRUE(prober.probe(hosts)[0].ok());
}

// --- probe_host_ssh through the fake ssh (tests/ssh/fake_ssh.h) ----------------------------------

/// Options for the fake: the probe at its usual path.
SshProbeOptions fake_options() {
  SshProbeOptions o;
  o.probe_path = "/opt/ddlrun/bin/ddlrun-probe";
  o.command_timeout = milliseconds(2000);
  return o;
}

/// The reason probing `host` through `connector` gives, or "ok".
std::string fake_reason(const std::string& host, const SshProbeOptions& o,
                        ssh::FakeConnector& connector) {
  try {
    probe_host_ssh(host, o, connector);
    return "ok";
  } catch (const ProbeError& e) {
    return e.what();
  }
}

TEST(ProbeHostFake, RunsTheProbeAndReadsItsInventory) {
  ssh::FakeConnector connector;
  connector.host("node1").program = [](ssh::FakeRemote& r) {
    r.print(to_yaml(inventory_named("node1")));
    r.print("a warning\n", ssh::Stream::kStderr);
    r.end(0);
  };
  SshProbeOptions o = fake_options();
  o.user = "alice";
  EXPECT_EQ(probe_host_ssh("node1", o, connector), inventory_named("node1"));
  EXPECT_EQ(connector.connected(), std::vector<std::string>{"node1"});
  EXPECT_EQ(connector.last_options().user, "alice");
  EXPECT_EQ(connector.host("node1").commands,
            std::vector<std::string>{"/opt/ddlrun/bin/ddlrun-probe"});
  EXPECT_EQ(connector.host("node1").sessions_open, 0);  // closed after the probe
  EXPECT_TRUE(connector.host("node1").remotes.at(0)->closed());
}

TEST(ProbeHostFake, AHostThatSaysNoGivesItsReason) {
  ssh::FakeConnector connector;
  connector.host("node3").refuse = "connection refused (10.200.3.2:22)";
  EXPECT_EQ(fake_reason("node3", fake_options(), connector), "connection refused (10.200.3.2:22)");
  EXPECT_TRUE(connector.host("node3").commands.empty());
}

TEST(ProbeHostFake, AFailedExecGivesItsReason) {
  ssh::FakeConnector connector;
  connector.host("node1").exec_error = "channel open refused";
  EXPECT_EQ(fake_reason("node1", fake_options(), connector),
            "cannot run '/opt/ddlrun/bin/ddlrun-probe' on node1:22: channel open refused");
}

TEST(ProbeHostFake, ExitStatusAndSignalAreJudged) {
  ssh::FakeConnector connector;
  connector.host("node3").program = [](ssh::FakeRemote& r) {
    r.print("bash: /opt/ddlrun/bin/ddlrun-probe: No such file or directory\n",
            ssh::Stream::kStderr);
    r.end(127);
  };
  connector.host("node4").program = [](ssh::FakeRemote& r) { r.end(-1, "KILL"); };
  EXPECT_EQ(fake_reason("node3", fake_options(), connector),
            "ddlrun-probe is not installed at /opt/ddlrun/bin/ddlrun-probe on node3 (exit status "
            "127, \"bash: /opt/ddlrun/bin/ddlrun-probe: No such file or directory\"); install "
            "ddlrun there at the same path as here, or plan offline with --host-xml node3=FILE");
  EXPECT_EQ(fake_reason("node4", fake_options(), connector),
            "'/opt/ddlrun/bin/ddlrun-probe' was killed by signal KILL and printed nothing on "
            "stderr");
}

TEST(ProbeHostFake, ACommandThatNeverEndsTimesOut) {
  ssh::FakeConnector connector;
  SshProbeOptions o = fake_options();
  o.command_timeout = milliseconds(200);
  EXPECT_EQ(fake_reason("node1", o, connector),
            "timed out after 0.2 s waiting for '/opt/ddlrun/bin/ddlrun-probe' to finish");
}

/// This process's threads (/proc/self/status).
int threads_now() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

/// Plays slow probe commands on one thread (one each would count against the prober's): each
/// prints its host's inventory and ends `after` it started.
class LateInventories {
 public:
  explicit LateInventories(milliseconds after) : after_(after), thread_([this] { run(); }) {}
  ~LateInventories() {
    done_ = true;
    thread_.join();
  }
  /// The program of host `host`'s command.
  std::function<void(ssh::FakeRemote&)> program(const std::string& host) {
    return [this, host](ssh::FakeRemote& r) {
      std::lock_guard lock(mutex_);
      due_.push_back({std::chrono::steady_clock::now() + after_, &r, host});
    };
  }

 private:
  struct Due {
    std::chrono::steady_clock::time_point at;
    ssh::FakeRemote* remote;  ///< null once played
    std::string host;
  };
  void run() {
    while (!done_) {
      std::this_thread::sleep_for(milliseconds(5));
      std::lock_guard lock(mutex_);
      for (Due& d : due_) {
        if (d.remote == nullptr || std::chrono::steady_clock::now() < d.at) continue;
        d.remote->print(to_yaml(inventory_named(d.host)));
        d.remote->end(0);
        d.remote = nullptr;
      }
    }
  }
  milliseconds after_;
  std::mutex mutex_;
  std::vector<Due> due_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Over ssh a host whose probe command is slow (a login shell that sleeps) holds no
// thread while it is: 48 hosts whose commands print their inventory 1 s after they start are
// probed at max_parallel 32 in one round of that second (a thread each for the wait would take
// two), by at most 32 threads more than before (and the sampler's); a refused login and a
// missing probe fail with probe_host_ssh's texts.
TEST(RemoteProberFake, SlowCommandsHoldNoThreadAndAllWaitTogether) {
  ssh::FakeConnector connector;
  LateInventories late(milliseconds(1000));
  std::vector<std::string> hosts;
  for (int i = 0; i < 48; ++i) {
    hosts.push_back("n" + std::to_string(i));
    connector.host(hosts.back()).program = late.program(hosts.back());
  }
  connector.host("refused").refuse = "connection refused (10.200.3.2:22)";
  connector.host("bare").program = [](ssh::FakeRemote& r) {
    r.print("sh: 1: /opt/ddlrun/bin/ddlrun-probe: not found\n", ssh::Stream::kStderr);
    r.end(127);
  };
  hosts.push_back("refused");
  hosts.push_back("bare");
  SshProbeOptions o = fake_options();
  o.command_timeout = milliseconds(10'000);
  ASSERT_EQ(o.max_parallel, 32);
  const int before = threads_now();
  std::atomic<int> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), threads_now());
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<HostProbe> r = RemoteProber(o, connector).probe(hosts);
  const auto took = std::chrono::steady_clock::now() - t0;
  done = true;
  sampler.join();
  EXPECT_LT(took, milliseconds(1800));
  EXPECT_LE(peak, before + 1 + 32);
  ASSERT_EQ(r.size(), 50u);
  for (int i = 0; i < 48; ++i) {
    EXPECT_TRUE(r[i].ok()) << r[i].host << ": " << r[i].error;
    if (r[i].ok()) {
      EXPECT_EQ(*r[i].inventory, inventory_named(r[i].host));
    }
  }
  EXPECT_EQ(r[48].error, "connection refused (10.200.3.2:22)");
  EXPECT_EQ(r[49].error, fake_reason("bare", fake_options(), connector));
}

// The same reading loop keeps probe_host_ssh's deadline: a command that never prints times out
// with its text, and the other hosts are not held up by it.
TEST(RemoteProberFake, ASilentCommandTimesOutAlone) {
  ssh::FakeConnector connector;
  connector.host("quiet").program = [](ssh::FakeRemote&) {};
  connector.host("n1").program = [](ssh::FakeRemote& r) {
    r.print(to_yaml(inventory_named("n1")));
    r.end(0);
  };
  SshProbeOptions o = fake_options();
  o.command_timeout = milliseconds(300);
  const std::vector<std::string> hosts{"quiet", "n1"};
  const std::vector<HostProbe> r = RemoteProber(o, connector).probe(hosts);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].error, fake_reason("quiet", o, connector));
  EXPECT_EQ(r[0].error,
            "timed out after 0.3 s waiting for '/opt/ddlrun/bin/ddlrun-probe' to finish");
  EXPECT_TRUE(r[1].ok()) << r[1].error;
}

// --- probe_host_ssh without an ssh server --------------------------------------------------------

TEST(ProbeHostSsh, NameThatDoesNotResolve) {
  const TempDir dir;
  EXPECT_EQ(reason_of("nosuch.invalid", local_options(dir)),
            "cannot resolve host name 'nosuch.invalid': Name or service not known");
}

TEST(ProbeHostSsh, ConnectionRefused) {
  const TempDir dir;
  const LocalPort closed(false);  // bound, not listening: connecting is refused
  SshProbeOptions o = local_options(dir);
  o.port = closed.port();
  EXPECT_EQ(reason_of("127.0.0.1", o),
            "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
}

TEST(ProbeHostSsh, ConfigGivesHostNameAndPortOptionsOverride) {
  const TempDir dir;
  const LocalPort closed(false);
  const LocalPort other(false);
  SshProbeOptions o = local_options(dir);
  o.ssh_config = dir.write("config", "Host node9\n  HostName 127.0.0.1\n  Port " +
                                         std::to_string(closed.port()) + "\n  User nobody\n");
  EXPECT_EQ(reason_of("node9", o),
            "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
  o.port = other.port();
  EXPECT_EQ(reason_of("node9", o),
            "connection refused (127.0.0.1:" + std::to_string(other.port()) + ")");
}

TEST(ProbeHostSsh, MissingConfigFile) {
  const TempDir dir;
  SshProbeOptions o = local_options(dir);
  o.ssh_config = dir.path() + "/no_such_config";
  EXPECT_EQ(reason_of("node1", o),
            "cannot read ssh config " + o.ssh_config + ": No such file or directory");
}

TEST(ProbeHostSsh, ServerThatNeverGreetsTimesOut) {
  const TempDir dir;
  const LocalPort silent(true);  // the kernel accepts; nobody speaks
  SshProbeOptions o = local_options(dir);
  o.port = silent.port();
  o.connect_timeout = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  const std::string reason = reason_of("127.0.0.1", o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  EXPECT_EQ(reason, "timed out after 0.3 s waiting for the ssh server at 127.0.0.1:" +
                        std::to_string(silent.port()) + " to greet");
}

TEST(ProbeHostSsh, ServerThatIsNotSshAndNoLeaks) {
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
  SshProbeOptions o = local_options(dir);
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

TEST(ProbeHostSsh, ManyFailingHostsInParallel) {
  const TempDir dir;
  const LocalPort closed(false);
  SshProbeOptions o = local_options(dir);
  o.port = closed.port();
  std::vector<std::string> hosts = {"a.invalid", "b.invalid"};
  for (int i = 0; i < 30; ++i)
    hosts.push_back("127.0.0." + std::to_string(i + 1));
  const int before = open_fds();
  const std::vector<HostProbe> r = probe_hosts_ssh(hosts, o);
  EXPECT_EQ(open_fds(), before);
  ASSERT_EQ(r.size(), hosts.size());
  EXPECT_EQ(r[0].error, "cannot resolve host name 'a.invalid': Name or service not known");
  EXPECT_EQ(r[2].error, "connection refused (127.0.0.1:" + std::to_string(closed.port()) + ")");
  const std::string text = format_probe_failures(r);
  EXPECT_EQ(text.substr(0, text.find('\n')), "cannot probe 32 of 32 hosts:");
}

}  // namespace
}  // namespace ddl::mapper
