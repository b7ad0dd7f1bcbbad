#include "mapper/probe_remote.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "tests/lib/temp_dir.h"

namespace ddl::mapper {
namespace {

using ddl::testing::TempDir;
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

std::string reason_of_output(const RemoteOutput& out,
                             const std::string& command = "/opt/ddlrun/bin/ddlrun-probe") {
  try {
    inventory_from_probe_output("node3", command, out);
    return "ok";
  } catch (const ProbeError& e) {
    return e.what();
  }
}

// --- the remote command's output ---------------------------------------------------------------

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
  RemoteProber prober(HostProbeOptions{}, [&](const std::string& host) {
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
  HostProbeOptions o;
  o.parallel = 3;
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
  HostProbeOptions o;
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
  HostProbeOptions o;
  o.cache_dir = dir.path() + "/cache";
  RemoteProber prober(o, [](const std::string& host) { return inventory_named(host); });
  const std::vector<std::string> hosts = {"n1"};
  EXPECT_TRUE(prober.probe(hosts)[0].ok());
  EXPECT_FALSE(std::filesystem::exists(o.cache_dir));
}

TEST(ProbeCache, UnusableCacheDirIsSkipped) {
  const TempDir dir;
  HostProbeOptions o;
  o.job_id = "7";
  o.cache_dir = dir.write("a_file", "not a directory");
  RemoteProber prober(o, [](const std::string& host) { return inventory_named(host); });
  const std::vector<std::string> hosts = {"n1"};
  EXPECT_TRUE(prober.probe(hosts)[0].ok());
}

}  // namespace
}  // namespace ddl::mapper
