// The cache of this host's probe (mapper/probe_cache.h): a key that changes recomputes, a file
// that is corrupt, a link, another user's or in another user's directory is ignored without a
// crash, and ddlruns racing on one file each get a whole answer. The same for the hwloc XML kept
// beside it for the PMIx server, and ddlrun's choice of hwloc plugins changes no probe answer.

#include "mapper/probe_cache.h"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mapper/probe_hwloc.h"

namespace ddl::mapper {
namespace {

namespace fs = std::filesystem;

/// A private scratch directory, removed afterwards.
class ProbeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/probe_cache_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/ddlrun/hwloc";
  }
  void TearDown() override { fs::remove_all(root_); }

  /// The one cache file of `extension` the directory holds.
  std::string cache_file(const char* extension = ".yaml") const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == extension) return e.path();
    }
    return "";
  }

  std::string root_;
  std::string dir_;
};

Inventory recorded(const char* name) {
  ProbeOptions po;
  po.xml_path = std::string(DDL_TEST_DATA_DIR) + "/topologies/" + name;
  return probe_hwloc(po);
}

TEST_F(ProbeCacheTest, SecondProbeWithTheSameKeyIsReadFromTheFile) {
  const Inventory summit = recorded("summit-ac922.xml");
  int computed = 0;
  const auto compute = [&] {
    ++computed;
    return summit;
  };
  bool hit = true;
  EXPECT_EQ(cached_probe(dir_, "key A", compute, &hit), summit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(cached_probe(dir_, "key A", compute, &hit), summit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(computed, 1);
  struct stat st {};
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(cache_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ProbeCacheTest, ChangedKeyRecomputesAndReplacesTheAnswer) {
  const Inventory summit = recorded("summit-ac922.xml");
  const Inventory laptop = recorded("laptop-1p4c8t.xml");
  bool hit = true;
  cached_probe(
      dir_, "boot=1", [&] { return summit; }, &hit);
  EXPECT_EQ(cached_probe(
                dir_, "boot=2", [&] { return laptop; }, &hit),
            laptop);
  EXPECT_FALSE(hit);
  EXPECT_EQ(cached_probe(
                dir_, "boot=2", [&] { return summit; }, &hit),
            laptop);
  EXPECT_TRUE(hit);
}

TEST_F(ProbeCacheTest, CorruptFileIsIgnoredAndRewritten) {
  const Inventory laptop = recorded("laptop-1p4c8t.xml");
  cached_probe(dir_, "k", [&] { return laptop; });
  const std::string file = cache_file();
  std::string text;
  {
    std::ifstream in(file);
    std::getline(in, text);  // the key line, kept, so only the YAML is damaged
  }
  for (const std::string& body : {std::string("packages: [unclosed\n"), std::string("\x01\xff"),
                                  std::string("version: 99\n")}) {
    std::ofstream(file, std::ios::trunc) << text << "\n" << body;
    bool hit = true;
    EXPECT_EQ(cached_probe(
                  dir_, "k", [&] { return laptop; }, &hit),
              laptop)
        << body;
    EXPECT_FALSE(hit) << body;
    EXPECT_EQ(cached_probe(
                  dir_, "k", [&] { return Inventory{}; }, &hit),
              laptop)
        << body;
    EXPECT_TRUE(hit) << body;
  }
}

TEST_F(ProbeCacheTest, LinkOrForeignFileIsNotRead) {
  const Inventory laptop = recorded("laptop-1p4c8t.xml");
  const Inventory summit = recorded("summit-ac922.xml");
  cached_probe(dir_, "k", [&] { return laptop; });
  const std::string file = cache_file();
  // A link to a file holding the right key and another answer: not followed.
  const std::string elsewhere = root_ + "/elsewhere.yaml";
  fs::copy_file(file, elsewhere);
  fs::remove(file);
  fs::create_symlink(elsewhere, file);
  bool hit = true;
  EXPECT_EQ(cached_probe(
                dir_, "k", [&] { return summit; }, &hit),
            summit);
  EXPECT_FALSE(hit);
  if (geteuid() != 0) GTEST_SKIP() << "another user's file needs root to make";
  ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);  // nobody's now
  EXPECT_EQ(cached_probe(
                dir_, "k", [&] { return laptop; }, &hit),
            laptop);
  EXPECT_FALSE(hit);
  // A directory of another user's: not used at all (nothing read, nothing written).
  fs::remove(file);
  ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(cached_probe(
                dir_, "k", [&] { return summit; }, &hit),
            summit);
  EXPECT_EQ(cached_probe(
                dir_, "k", [&] { return laptop; }, &hit),
            laptop);
  EXPECT_FALSE(hit);
}

TEST_F(ProbeCacheTest, RacingProcessesEachGetAWholeAnswer) {
  const Inventory summit = recorded("summit-ac922.xml");
  const Inventory laptop = recorded("laptop-1p4c8t.xml");
  std::vector<pid_t> children;
  for (int c = 0; c < 6; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Half write one key's answer, half another's, each reading what the others write.
      const bool odd = c % 2 != 0;
      const Inventory& mine = odd ? summit : laptop;
      bool ok = true;
      for (int i = 0; i < 40 && ok; ++i)
        ok = cached_probe(dir_, odd ? "odd" : "even", [&] { return mine; }) == mine;
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary file left behind
    EXPECT_EQ(e.path().extension(), ".yaml") << e.path();
}

TEST_F(ProbeCacheTest, TopologyXmlIsReadBackWhileItsKeyHoldsAndHwlocTakesIt) {
  int computed = 0;
  const auto xml = [&](const char* text) {
    return [&computed, text] {
      ++computed;
      return std::string(text);
    };
  };
  const auto any = [](const std::string&) { return true; };
  bool hit = true;
  EXPECT_EQ(cached_topology_xml(dir_, "boot=1", xml("<A/>"), any, &hit), "<A/>");
  EXPECT_FALSE(hit);
  EXPECT_EQ(cached_topology_xml(dir_, "boot=1", xml("<B/>"), any, &hit), "<A/>");
  EXPECT_TRUE(hit);
  EXPECT_EQ(computed, 1);
  struct stat st {};
  ASSERT_EQ(stat(cache_file(".xml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Another key: computed again and replaced.
  EXPECT_EQ(cached_topology_xml(dir_, "boot=2", xml("<B/>"), any, &hit), "<B/>");
  EXPECT_FALSE(hit);
  EXPECT_EQ(cached_topology_xml(dir_, "boot=2", xml("<C/>"), any, &hit), "<B/>");
  EXPECT_TRUE(hit);
  // What accept() refuses (hwloc cannot load it) is computed again and rewritten.
  const auto refuse_b = [](const std::string& text) { return text != "<B/>"; };
  EXPECT_EQ(cached_topology_xml(dir_, "boot=2", xml("<C/>"), refuse_b, &hit), "<C/>");
  EXPECT_FALSE(hit);
  EXPECT_EQ(cached_topology_xml(dir_, "boot=2", xml("<D/>"), refuse_b, &hit), "<C/>");
  EXPECT_TRUE(hit);
  EXPECT_EQ(computed, 3);
  // The inventory's file beside it is another file: neither answers for the other.
  EXPECT_EQ(cache_file(".yaml"), "");
  // No cache directory: compute() alone, nothing written.
  EXPECT_EQ(cached_topology_xml("", "boot=2", xml("<E/>"), any, &hit), "<E/>");
  EXPECT_FALSE(hit);
}

/// What a topology says of this host that its XML copy must say the same.
std::string summary(hwloc_topology_t t) {
  char* cpus = nullptr;
  hwloc_bitmap_list_asprintf(&cpus, hwloc_topology_get_topology_cpuset(t));
  std::string text = std::string("cpus ") + cpus;
  std::free(cpus);
  for (const hwloc_obj_type_t type :
       {HWLOC_OBJ_PACKAGE, HWLOC_OBJ_CORE, HWLOC_OBJ_PU, HWLOC_OBJ_NUMANODE, HWLOC_OBJ_PCI_DEVICE,
        HWLOC_OBJ_OS_DEVICE})
    text += std::string(" ") + hwloc_obj_type_string(type) + " " +
            std::to_string(hwloc_get_nbobjs_by_type(t, type));
  return text;
}

TEST(LocalTopology, CachedCopyEqualsADiscoveredOneAndIsThisSystems) {
  char tmpl[] = "/tmp/probe_cache_topo.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg != nullptr ? xdg : "";
  setenv("XDG_CACHE_HOME", tmpl, 1);
  unsetenv("DDL_PROBE_CACHE");
  const auto xml_file = [&] {
    for (const auto& e : fs::directory_iterator(std::string(tmpl) + "/ddlrun/hwloc")) {
      if (e.path().extension() == ".xml") return e.path();
    }
    return fs::path();
  };
  // Other tests add and remove network interfaces (namespace hosts), which changes the key: a
  // few tries, one of which sees the machine hold still.
  bool same = false, kept = false;
  for (int attempt = 0; attempt < 5 && !(same && kept); ++attempt) {
    hwloc_topology_t fresh = local_topology(false);
    hwloc_topology_t written = local_topology(true);  // discovered and written (or read)
    const fs::path file = xml_file();
    ASSERT_FALSE(file.empty()) << "no <host>.xml was written";
    const auto stamp = fs::last_write_time(file);
    hwloc_topology_t read = local_topology(true);  // read
    kept = fs::last_write_time(file) == stamp;
    same = summary(written) == summary(fresh) && summary(read) == summary(fresh);
    EXPECT_NE(hwloc_topology_get_flags(read) & HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM, 0ul);
    EXPECT_EQ(hwloc_topology_is_thissystem(read), 1);
    for (hwloc_topology_t t : {fresh, written, read})
      hwloc_topology_destroy(t);
  }
  EXPECT_TRUE(same) << "the cached topology differs from a discovered one";
  EXPECT_TRUE(kept) << "every later load rewrote the cached topology";
  fs::remove_all(tmpl);
  if (xdg != nullptr) {
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
  EXPECT_EQ(hwloc_source().rfind("hwloc:2.", 0), 0u) << hwloc_source();
}

/// The output of `command` (stdout and stderr).
std::string output_of(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  pclose(p);
  return out;
}

// ddlrun loads neither hwloc's GL, libxml2 nor libpciaccess plugin (LD_DEBUG=files lists what
// the dynamic loader opens), leaves the user's HWLOC_PLUGINS_BLACKLIST to hwloc, and probes the
// same answer as with every plugin.
TEST(HwlocPlugins, DdlrunLoadsNoneItDoesNotNeedAndProbesTheSame) {
  const std::string probe =
      std::string("env -u HWLOC_PLUGINS_BLACKLIST DDL_PROBE_CACHE=0 ") + DDLRUN_BINARY + " --probe";
  const std::string loaded = output_of("LD_DEBUG=files " + probe);
  ASSERT_NE(loaded.find("libhwloc"), std::string::npos) << loaded.substr(0, 2000);
  for (const char* plugin : {"hwloc_gl.so", "hwloc_xml_libxml.so", "hwloc_pci.so"})
    EXPECT_EQ(loaded.find(plugin), std::string::npos) << plugin << " was loaded";
  const std::string plugin_dir = "/usr/lib/x86_64-linux-gnu/hwloc/hwloc_gl.so";
  if (fs::exists(plugin_dir)) {
    const std::string user =
        output_of("LD_DEBUG=files HWLOC_PLUGINS_BLACKLIST=hwloc_opencl " +
                  std::string("DDL_PROBE_CACHE=0 ") + DDLRUN_BINARY + " --probe");
    EXPECT_NE(user.find("hwloc_gl.so"), std::string::npos) << "the user's list was not hwloc's";
  }
  // Every plugin (a list that names none) against the chosen ones: the same inventory. A few
  // tries: other tests add and remove network interfaces.
  bool same = false;
  std::string all, chosen;
  for (int attempt = 0; attempt < 5 && !same; ++attempt) {
    all = output_of("HWLOC_PLUGINS_BLACKLIST=none DDL_PROBE_CACHE=0 " + std::string(DDLRUN_BINARY) +
                    " --probe");
    chosen = output_of(probe);
    same = all == chosen;
  }
  EXPECT_TRUE(same) << "with every plugin:\n" << all << "\nwith ddlrun's:\n" << chosen;
}

TEST(LocalProbeKey, ChangesWithHwlocVariablesAndGpuSelection) {
  const std::string before = local_probe_key();
  EXPECT_EQ(local_probe_key(), before);
  ASSERT_EQ(setenv("HWLOC_PROBE_CACHE_TEST", "1", 1), 0);
  const std::string with_hwloc = local_probe_key();
  unsetenv("HWLOC_PROBE_CACHE_TEST");
  EXPECT_NE(with_hwloc, before);
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = cvd != nullptr ? cvd : "";
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "probe-cache-test", 1), 0);
  EXPECT_NE(local_probe_key(), before);
  if (cvd != nullptr) {
    setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  } else {
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
  EXPECT_EQ(local_probe_key(), before);
  EXPECT_NE(before.find("boot="), std::string::npos);
}

TEST(LocalProbeCacheDir, FollowsXdgAndTurnsOff) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg != nullptr ? xdg : "";
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  unsetenv("DDL_PROBE_CACHE");
  EXPECT_EQ(local_probe_cache_dir(), "/x/cache/ddlrun/hwloc");
  for (const char* off : {"0", "no", "off", "false"}) {
    setenv("DDL_PROBE_CACHE", off, 1);
    EXPECT_EQ(local_probe_cache_dir(), "") << off;
  }
  setenv("DDL_PROBE_CACHE", "1", 1);
  EXPECT_EQ(local_probe_cache_dir(), "/x/cache/ddlrun/hwloc");
  unsetenv("DDL_PROBE_CACHE");
  if (xdg != nullptr) {
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
}

TEST(LiveProbe, CachedAnswerEqualsAFreshOne) {
  char tmpl[] = "/tmp/probe_cache_live.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg != nullptr ? xdg : "";
  setenv("XDG_CACHE_HOME", tmpl, 1);
  unsetenv("DDL_PROBE_CACHE");
  ProbeOptions fresh;
  ProbeOptions cached;
  cached.use_cache = true;
  // Other tests add and remove network interfaces (namespace hosts), which changes both the
  // answer and the key: a few tries, one of which sees the machine hold still.
  bool same = false;
  for (int attempt = 0; attempt < 5 && !same; ++attempt) {
    const Inventory a = probe_hwloc(fresh);
    const Inventory b = probe_hwloc(cached);  // computed and written (or read)
    const Inventory c = probe_hwloc(cached);  // read
    same = b == a && c == a;
  }
  EXPECT_TRUE(same) << "the cached probe differs from a fresh one";
  EXPECT_TRUE(fs::exists(std::string(tmpl) + "/ddlrun/hwloc"));
  fs::remove_all(tmpl);
  if (xdg != nullptr) {
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
}

TEST(LiveProbe, SecondDdlrunReadsTheFirstOnesAnswer) {
  // Across processes: nothing in the key may change from one ddlrun to the next (the times of
  // /proc/self/ns files did), or the cache would be rewritten on every run.
  char tmpl[] = "/tmp/probe_cache_ddlrun.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string probe = std::string("env -u DDL_PROBE_CACHE XDG_CACHE_HOME=") + tmpl + " " +
                            DDLRUN_BINARY + " --probe >/dev/null";
  ASSERT_EQ(std::system(probe.c_str()), 0);
  std::string file;
  for (const auto& e : fs::directory_iterator(std::string(tmpl) + "/ddlrun/hwloc"))
    file = e.path();
  ASSERT_FALSE(file.empty());
  // A few tries, as above: an interface that comes or goes between two runs changes the key.
  bool kept = false;
  for (int attempt = 0; attempt < 5 && !kept; ++attempt) {
    const auto written = fs::last_write_time(file);
    ASSERT_EQ(std::system(probe.c_str()), 0);
    kept = fs::last_write_time(file) == written;
  }
  EXPECT_TRUE(kept) << "every later ddlrun --probe rewrote " << file;
  const std::string off = std::string("DDL_PROBE_CACHE=0 XDG_CACHE_HOME=") + tmpl + "/off " +
                          DDLRUN_BINARY + " --probe >/dev/null";
  ASSERT_EQ(std::system(off.c_str()), 0);
  EXPECT_FALSE(fs::exists(std::string(tmpl) + "/off")) << "DDL_PROBE_CACHE=0 wrote a cache";
  fs::remove_all(tmpl);
}

TEST(LiveProbe, DdlrunsPmixServerKeepsTheTopologyBesideTheProbe) {
  // A launch (whose PMIx server needs this host's topology) writes <host>.xml once; the next
  // reads it. DDL_PROBE_CACHE=0 writes nothing.
  char tmpl[] = "/tmp/probe_cache_pmix.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string run = std::string("env -u DDL_PROBE_CACHE XDG_CACHE_HOME=") + tmpl + " " +
                          DDLRUN_BINARY + " -q -H localhost:2 true";
  ASSERT_EQ(std::system(run.c_str()), 0);
  std::string file;
  for (const auto& e : fs::directory_iterator(std::string(tmpl) + "/ddlrun/hwloc")) {
    if (e.path().extension() == ".xml") file = e.path();
  }
  ASSERT_FALSE(file.empty()) << "the launch kept no topology";
  bool kept = false;
  for (int attempt = 0; attempt < 5 && !kept; ++attempt) {
    const auto written = fs::last_write_time(file);
    ASSERT_EQ(std::system(run.c_str()), 0);
    kept = fs::last_write_time(file) == written;
  }
  EXPECT_TRUE(kept) << "every later launch rewrote " << file;
  const std::string off = std::string("DDL_PROBE_CACHE=0 XDG_CACHE_HOME=") + tmpl + "/off " +
                          DDLRUN_BINARY + " -q -H localhost:2 true";
  ASSERT_EQ(std::system(off.c_str()), 0);
  EXPECT_FALSE(fs::exists(std::string(tmpl) + "/off")) << "DDL_PROBE_CACHE=0 wrote a cache";
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace ddl::mapper
