#include "comm/topology.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace ddl::comm {
namespace {

namespace fs = std::filesystem;

// 2 hosts x 2 GPUs, mode r:2x2, host-major rings.
Topology small_topology() {
  Topology t;
  t.job_id = "job-42";
  t.hosts = {
      {0, "node01", "10.0.0.1", {{"mlx5_0", "infiniband", "10.1.0.1"}}},
      {1,
       "node02",
       "10.0.0.2",
       {{"mlx5_0", "infiniband", "10.1.0.2"}, {"eth0", "ethernet", "fe80::2"}}},
  };
  t.ranks = {
      {0, 0, 0, 0, "0004:04:00.0", "GPU-11111111-2222-3333-4444-555555555555",
       CpuSet::parse("0-27"), "mlx5_0", "10.1.0.1"},
      {1, 1, 0, 1, "0004:05:00.0", "", CpuSet::parse("28-55,88-91"), "mlx5_0", "10.1.0.1"},
      {2, 0, 1, 0, "0004:04:00.0", "", CpuSet::parse("0-27"), "mlx5_0", "10.1.0.2"},
      {3, 1, 1, 1, "0004:05:00.0", "", CpuSet{}, "", ""},
  };
  t.mode = Mode{Algorithm::kRing, {2, 2}};
  t.rings = default_rings(t.mode.dims);
  return t;
}

// What format_topology writes for small_topology(): the layout the fast reader takes.
constexpr std::string_view kSmallText =
    R"(# ddlrun topology: where each rank runs and the rings it joins; see ddl-topology(5).
version: "1.0"
job_id: "job-42"
mode: "r:2x2"
hosts:
  - {index: 0, name: "node01", address: "10.0.0.1", nics: [{name: "mlx5_0", kind: "infiniband", address: "10.1.0.1"}]}
  - {index: 1, name: "node02", address: "10.0.0.2", nics: [{name: "mlx5_0", kind: "infiniband", address: "10.1.0.2"}, {name: "eth0", kind: "ethernet", address: "fe80::2"}]}
ranks:
  - {rank: 0, local_rank: 0, host: 0, gpu: 0, gpu_bus_id: "0004:04:00.0", gpu_uuid: "GPU-11111111-2222-3333-4444-555555555555", cpus: "0-27", nic: "mlx5_0", address: "10.1.0.1"}
  - {rank: 1, local_rank: 1, host: 0, gpu: 1, gpu_bus_id: "0004:05:00.0", gpu_uuid: "", cpus: "28-55,88-91", nic: "mlx5_0", address: "10.1.0.1"}
  - {rank: 2, local_rank: 0, host: 1, gpu: 0, gpu_bus_id: "0004:04:00.0", gpu_uuid: "", cpus: "0-27", nic: "mlx5_0", address: "10.1.0.2"}
  - {rank: 3, local_rank: 1, host: 1, gpu: 1, gpu_bus_id: "0004:05:00.0", gpu_uuid: "", cpus: "", nic: "", address: ""}
ring_orders:
  - dimension: 0
    rings:
      - [0, 1]
      - [2, 3]
  - dimension: 1
    rings:
      - [0, 2]
      - [1, 3]
)";

// The same plan as a person would write it (the example of ddl-topology(5)): block style,
// comments, plain scalars, optional fields left out.
constexpr std::string_view kHandWritten = R"(# Two hosts with two GPUs each.
version: "1.0"
job_id: job-42
mode: r:2x2          # 2 GPUs per host x 2 hosts
hosts:
  - index: 0
    name: node01
    address: 10.0.0.1
    nics:
      - name: mlx5_0
        kind: infiniband
        address: 10.1.0.1
  - index: 1
    name: node02
    address: 10.0.0.2
    nics:
      - {name: mlx5_0, kind: infiniband, address: 10.1.0.2}
      - {name: eth0, kind: ethernet, address: "fe80::2"}
ranks:
  - rank: 0
    local_rank: 0
    host: 0
    gpu: 0
    gpu_bus_id: "0004:04:00.0"
    gpu_uuid: GPU-11111111-2222-3333-4444-555555555555
    cpus: 0-27
    nic: mlx5_0
    address: 10.1.0.1
  - {rank: 1, local_rank: 1, host: 0, gpu: 1, gpu_bus_id: "0004:05:00.0", cpus: "28-55,88-91",
     nic: mlx5_0, address: 10.1.0.1}
  - {rank: 2, local_rank: 0, host: 1, gpu: 0, gpu_bus_id: "0004:04:00.0", cpus: 0-27,
     nic: mlx5_0, address: 10.1.0.2}
  - {rank: 3, local_rank: 1, host: 1, gpu: 1, gpu_bus_id: "0004:05:00.0", cpus: ""}
ring_orders:
  - dimension: 0     # inside each host
    rings: [[0, 1], [2, 3]]
  - dimension: 1     # across hosts
    rings:
      - [0, 2]
      - [1, 3]
)";

std::string replaced(std::string_view text, std::string_view from, std::string_view to) {
  std::string s(text);
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::string validation_error(const Topology& t) {
  try {
    validate(t);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "no error";
}

std::string parse_error(std::string_view text) {
  std::string fast, generic;
  try {
    parse_topology(text, "topology.yaml");
    fast = "no error";
  } catch (const TopologyError& e) {
    fast = e.what();
  }
  try {
    parse_topology_generic(text, "topology.yaml");
    generic = "no error";
  } catch (const TopologyError& e) {
    generic = e.what();
  }
  EXPECT_EQ(fast, generic) << "the fast and the yaml-cpp reader disagree";
  return fast;
}

class TopologyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/topology_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static std::string slurp(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

// ---------------------------------------------------------------------------------------------
// CpuSet

TEST(CpuSetTest, ParsesRangesAndWritesThemCanonically) {
  EXPECT_EQ(CpuSet::parse("0-27,88-115").str(), "0-27,88-115");
  EXPECT_EQ(CpuSet::parse("5").str(), "5");
  EXPECT_EQ(CpuSet::parse("").str(), "");
  EXPECT_TRUE(CpuSet::parse("  ").empty());
  EXPECT_EQ(CpuSet::parse("9, 4-6 ,0-1,2,7-8").str(), "0-2,4-9");
  EXPECT_EQ(CpuSet::parse("3-5,4-10,10").str(), "3-10");
  EXPECT_EQ(CpuSet::of({7, 3, 4, 5, 3, 9}).str(), "3-5,7,9");
}

TEST(CpuSetTest, Queries) {
  const CpuSet set = CpuSet::parse("0-3,8-9");
  EXPECT_EQ(set.size(), 6);
  EXPECT_EQ(set.pus(), (std::vector<int>{0, 1, 2, 3, 8, 9}));
  EXPECT_TRUE(set.contains(0));
  EXPECT_TRUE(set.contains(9));
  EXPECT_FALSE(set.contains(5));
  EXPECT_FALSE(set.contains(10));
  EXPECT_EQ(set.first_shared(CpuSet::parse("4-8")), 8);
  EXPECT_EQ(set.first_shared(CpuSet::parse("4-7,10")), std::nullopt);
  EXPECT_EQ(set.ranges(), (std::vector<CpuSet::Range>{{0, 3}, {8, 9}}));
  CpuSet built;
  built.add(4, 7);
  built.add(3);
  built.add(10, 12);
  EXPECT_EQ(built.str(), "3-7,10-12");
}

TEST(CpuSetTest, ErrorTexts) {
  const auto error = [](std::string_view text) -> std::string {
    try {
      CpuSet::parse(text);
    } catch (const TopologyError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error("3-x"), "invalid CPU set '3-x': 'x' is not a PU index");
  EXPECT_EQ(error("a"), "invalid CPU set 'a': 'a' is not a PU index");
  EXPECT_EQ(error("-4"),
            "invalid CPU set '-4': entry '-4' starts with '-': PU indices cannot be negative");
  EXPECT_EQ(
      error("0,-5-3"),
      "invalid CPU set '0,-5-3': entry '-5-3' starts with '-': PU indices cannot be negative");
  EXPECT_EQ(error("3--5"), "invalid CPU set '3--5': entry '3--5': PU indices cannot be negative");
  EXPECT_EQ(error("27-0"), "invalid CPU set '27-0': range 27-0 runs backwards");
  EXPECT_EQ(error("0-1048576"), "invalid CPU set '0-1048576': PU 1048576 is above 1048575");
  EXPECT_EQ(error("99999999999"), "invalid CPU set '99999999999': '99999999999' is not a PU index");
  EXPECT_EQ(error("0,,3"), "invalid CPU set '0,,3': an entry is empty");
  EXPECT_EQ(error("1,"), "invalid CPU set '1,': an entry is empty");
  const auto thrown = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const TopologyError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(thrown([] { CpuSet::of({3, -1}); }), "invalid CPU set: PU indices cannot be negative");
  CpuSet set;
  EXPECT_EQ(thrown([&] { set.add(5, 4); }), "invalid CPU set: range 5-4 runs backwards");
  EXPECT_EQ(thrown([&] { set.add(1 << 20); }), "invalid CPU set: PU 1048576 is above 1048575");
}

// ---------------------------------------------------------------------------------------------
// default_rings

TEST(DefaultRingsTest, SixByTwoByOneByOne) {
  const std::vector<std::vector<Ring>> expected = {
      {{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}},
      {{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}},
      {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}},
      {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}},
  };
  EXPECT_EQ(default_rings({6, 2, 1, 1}), expected);
}

TEST(DefaultRingsTest, FourByThree) {
  const std::vector<std::vector<Ring>> expected = {
      {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}},
      {{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}},
  };
  EXPECT_EQ(default_rings({4, 3}), expected);
}

TEST(DefaultRingsTest, MiddleDimensionStridesOverTheInnerOne) {
  const auto rings = default_rings({2, 3, 2});
  ASSERT_EQ(rings.size(), 3u);
  EXPECT_EQ(rings[1], (std::vector<Ring>{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}}));
  EXPECT_EQ(rings[2], (std::vector<Ring>{{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}}));
}

TEST(DefaultRingsTest, EveryLayoutValidates) {
  for (const std::vector<int>& dims :
       {std::vector<int>{1}, {12}, {6, 2, 1, 1}, {1, 1, 12}, {2, 3, 2}, {6, 18, 4, 2}}) {
    Topology t;
    t.hosts = {{0, "h", "h", {}}};
    t.mode = Mode{Algorithm::kExplore, dims};
    for (int r = 0; r < t.mode.ranks(); ++r)
      t.ranks.push_back({r, r, 0, -1, "", "", {}, "", ""});
    t.rings = default_rings(dims);
    EXPECT_NO_THROW(validate(t)) << t.mode.str();
  }
}

TEST(DefaultRingsTest, RejectsDimensionsBelowOne) {
  try {
    default_rings({4, 0});
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_STREQ(e.what(), "default_rings: dimension 1 is 0; each must be at least 1");
  }
}

// ---------------------------------------------------------------------------------------------
// Writing and reading text

TEST(TopologyFormatTest, WritesTheDocumentedLayout) {
  EXPECT_EQ(format_topology(small_topology()), kSmallText);
}

TEST(TopologyFormatTest, FastAndYamlCppReadersAgree) {
  const Topology t = small_topology();
  EXPECT_EQ(parse_topology_fast(kSmallText, "t.yaml"), t) << "written files take the fast path";
  EXPECT_EQ(parse_topology_generic(kSmallText, "t.yaml"), t);
  EXPECT_EQ(parse_topology(kSmallText, "t.yaml"), t);
}

TEST(TopologyFormatTest, ParsesTheHandWrittenExample) {
  EXPECT_EQ(parse_topology_fast(kHandWritten, "example.yaml"), std::nullopt);
  EXPECT_EQ(parse_topology(kHandWritten, "example.yaml"), small_topology());
}

TEST(TopologyFormatTest, TheManPageExampleIsTheHandWrittenOne) {
  std::ifstream in(std::string(DDL_TEST_DATA_DIR) + "/../man/ddl-topology.5");
  ASSERT_TRUE(in) << "cannot open man/ddl-topology.5";
  std::string line, example;
  bool in_examples = false, in_example = false;
  while (std::getline(in, line)) {
    if (line.starts_with(".SH")) in_examples = line == ".SH EXAMPLES";
    if (!in_examples) continue;
    if (line == ".EX") {
      in_example = true;
    } else if (line == ".EE") {
      break;
    } else if (in_example) {
      for (size_t at; (at = line.find("\\-")) != std::string::npos;)
        line.replace(at, 2, "-");
      example += line + "\n";
    }
  }
  EXPECT_EQ(example, kHandWritten);
}

TEST(TopologyFormatTest, RoundTripsStringsThatNeedEscapes) {
  Topology t = small_topology();
  t.job_id = "a \"quoted\" job\\with\ttabs\nand lines \x7f";
  t.hosts[0].name =
      "n\xc3\xb6"
      "de01";
  t.hosts[1].nics[0].kind = "#not a comment, {flow: [x]}";
  t.ranks[2].gpu_uuid = "'single'";
  t.ranks[3].address = " spaced ";
  const std::string text = format_topology(t);
  EXPECT_NE(text.find(R"(job_id: "a \"quoted\" job\\with\x09tabs\x0aand lines \x7f")"),
            std::string::npos)
      << text;
  EXPECT_EQ(parse_topology_fast(text, "t.yaml"), std::nullopt) << "escapes go to yaml-cpp";
  EXPECT_EQ(parse_topology(text, "t.yaml"), t);
  EXPECT_EQ(parse_topology_generic(text, "t.yaml"), t);
}

TEST(TopologyFormatTest, RoundTripsEmptyNicListsAndRanksWithoutGpus) {
  Topology t = small_topology();
  t.hosts[0].nics.clear();
  for (RankPlacement& r : t.ranks)
    r.gpu = -1;
  EXPECT_EQ(parse_topology_fast(format_topology(t), "t.yaml"), t);
  EXPECT_EQ(parse_topology_generic(format_topology(t), "t.yaml"), t);
}

TEST(TopologyFormatTest, ListsMayComeInAnyOrder) {
  Topology t = small_topology();
  std::swap(t.ranks[0], t.ranks[3]);
  std::swap(t.hosts[0], t.hosts[1]);
  EXPECT_NO_THROW(validate(t));
  EXPECT_EQ(parse_topology_fast(format_topology(t), "t.yaml"), t);
  ASSERT_NE(t.find_rank(0), nullptr);
  EXPECT_EQ(t.find_rank(0)->gpu_uuid, "GPU-11111111-2222-3333-4444-555555555555");
  ASSERT_NE(t.find_host(1), nullptr);
  EXPECT_EQ(t.find_host(1)->name, "node02");
  EXPECT_EQ(t.find_rank(4), nullptr);
  EXPECT_EQ(t.find_host(-1), nullptr);
}

TEST(TopologyFormatTest, SkipsCommentsAndBlankLinesInTheWrittenLayout) {
  std::string text = replaced(kSmallText, "ranks:\n", "\n# the ranks\nranks:\n");
  text = replaced(text, "  - dimension: 1\n", "    # across hosts\n  - dimension: 1\n");
  EXPECT_EQ(parse_topology_fast(text, "t.yaml"), small_topology());
}

// The smallest plan in the written layout: one host, one rank, one ring.
constexpr std::string_view kOneRankText = R"(version: "1.0"
job_id: "j"
mode: "r:1"
hosts:
  - {index: 0, name: "n", address: "", nics: []}
ranks:
  - {rank: 0, local_rank: 0, host: 0, gpu: -1, gpu_bus_id: "", gpu_uuid: "", cpus: "", nic: "", address: ""}
ring_orders:
  - dimension: 0
    rings:
      - [0]
)";

// The readers agree (as fuzz_topology checks) on a key with no entries under it: null to
// yaml-cpp, so the fast reader gives it up rather than reading an empty list.
TEST(TopologyFormatTest, AKeyWithoutEntriesIsNotAnEmptyList) {
  ASSERT_NE(parse_topology_fast(kOneRankText, "t.yaml"), std::nullopt);
  const std::string host = "  - {index: 0, name: \"n\", address: \"\", nics: []}\n";
  const std::string rank =
      "  - {rank: 0, local_rank: 0, host: 0, gpu: -1, gpu_bus_id: \"\", gpu_uuid: \"\", cpus: "
      "\"\", nic: \"\", address: \"\"}\n";
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {replaced(kOneRankText, host, ""),
       "topology.yaml:5:1: hosts: expected a sequence, got nothing"},
      {replaced(kOneRankText, rank, ""),
       "topology.yaml:7:1: ranks: expected a sequence, got nothing"},
      {replaced(kOneRankText, "      - [0]\n", ""),
       "topology.yaml:11:1: ring_orders[0].rings: expected a sequence, got nothing"},
      {replaced(kOneRankText, "  - dimension: 0\n    rings:\n      - [0]\n", ""),
       "topology.yaml:9:1: ring_orders: expected a sequence, got nothing"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_topology_fast(c.text, "t.yaml"), std::nullopt) << c.text;
    EXPECT_EQ(parse_error(c.text), c.error);
  }
}

// The readers must agree (fuzz_topology checks it): yaml-cpp reads a text whose first bytes hold
// a NUL as UTF-16, and one further on as the end of a value; both readers refuse any NUL.
TEST(TopologyFormatTest, ANulByteAnywhereIsRefused) {
  const std::string text = std::string("#\0\n", 3) + std::string(kOneRankText);
  EXPECT_EQ(parse_topology_fast(text, "t.yaml"), std::nullopt);
  EXPECT_EQ(parse_error(text),
            "topology.yaml:1:2: a NUL byte; a topology file is text: is this the topology file "
            "ddlrun wrote?");
  const std::string inside =
      replaced(kSmallText, "name: \"node02\"", std::string("name: \"node\0\"", 14));
  EXPECT_EQ(parse_topology_fast(inside, "t.yaml"), std::nullopt);
  EXPECT_EQ(parse_error(inside),
            "topology.yaml:7:27: a NUL byte; a topology file is text: is this the topology file "
            "ddlrun wrote?");
  EXPECT_EQ(parse_error(std::string(kSmallText) + std::string("\0\0\0", 3)),
            "topology.yaml:22:1: a NUL byte; a topology file is text: is this the topology file "
            "ddlrun wrote?");
}

// ---------------------------------------------------------------------------------------------
// Versions

TEST(TopologyVersionTest, RejectsANewerMajorVersion) {
  const std::string text = replaced(kSmallText, "version: \"1.0\"", "version: \"2.0\"");
  EXPECT_EQ(parse_error(text),
            "topology.yaml was written by a newer ddlrun (format 2.0); this libddl reads format "
            "1.x: use the same ddlrun and libddl");
  // Whatever else a 2.x file holds, and however the version is spelled.
  EXPECT_EQ(parse_error("version: 2.3\nsomething: {else: 1}\n"),
            "topology.yaml was written by a newer ddlrun (format 2.3); this libddl reads format "
            "1.x: use the same ddlrun and libddl");
}

TEST(TopologyVersionTest, RejectsAnOlderMajorVersion) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "version: \"1.0\"", "version: '0.9'")),
            "topology.yaml was written by an older ddlrun (format 0.9); this libddl reads format "
            "1.x: use the same ddlrun and libddl");
}

TEST(TopologyVersionTest, AcceptsANewerMinorVersionAndIgnoresItsNewFields) {
  std::string text = replaced(kSmallText, "version: \"1.0\"", "version: \"1.7\"");
  EXPECT_EQ(parse_topology_fast(text, "t.yaml"), small_topology());
  text = replaced(text, "mode: \"r:2x2\"\n", "mode: \"r:2x2\"\nfabric: {switches: 3}\n");
  text = replaced(text, "address: \"10.1.0.1\"}\n", "address: \"10.1.0.1\", numa: 0}\n");
  EXPECT_EQ(parse_topology(text, "t.yaml"), small_topology());
}

TEST(TopologyVersionTest, MalformedVersions) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "version: \"1.0\"", "version: \"one\"")),
            "topology.yaml:2:10: version: expected \"<major>.<minor>\" such as \"1.0\", got 'one'");
  EXPECT_EQ(parse_error(replaced(kSmallText, "version: \"1.0\"\n", "")),
            "topology.yaml:2:1: version: missing; is this a ddlrun topology file?");
}

// ---------------------------------------------------------------------------------------------
// Parse errors: the file, the place and the field.

TEST(TopologyParseErrorTest, NotYaml) {
  EXPECT_EQ(parse_error("version: \"1.0\"\nhosts: [\n"),
            "topology.yaml:3:1: not valid YAML: end of sequence flow not found");
}

TEST(TopologyParseErrorTest, NotAMapping) {
  EXPECT_EQ(parse_error("- 1\n- 2\n"),
            "topology.yaml:1:1: expected a mapping with the keys version, job_id, mode, hosts, "
            "ranks and ring_orders, got a sequence; is this a ddlrun topology file?");
  EXPECT_EQ(parse_error(""),
            "topology.yaml: expected a mapping with the keys version, job_id, mode, hosts, ranks "
            "and ring_orders, got nothing; is this a ddlrun topology file?");
}

// Aliases are refused before anything is built: each use repeats its anchor's whole subtree
// (860 KB aliasing a 20,000-entry ring 200,000 times grew each rank to 2.6 GB).
TEST(TopologyParseErrorTest, AliasesAreRefused) {
  const std::string text = replaced(replaced(kSmallText, "      - [0, 1]\n", "      - &r [0, 1]\n"),
                                    "      - [1, 3]", "      - *r");
  EXPECT_EQ(parse_error(text),
            "topology.yaml:21:9: a YAML alias (*name): topology files hold none (each use of an "
            "alias repeats a whole subtree); write the entries out, as ddlrun does");
}

TEST(TopologyParseErrorTest, AKeyGivenTwiceIsRefused) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "host: 1, gpu: 1", "host: 1, gpu: 1, gpu: 0")),
            "topology.yaml:12:47: the key 'gpu' again (first at line 12): give each field once");
  EXPECT_EQ(
      parse_error(replaced(kSmallText, "mode: \"r:2x2\"\n", "mode: \"r:2x2\"\nmode: \"r:4\"\n")),
      "topology.yaml:5:1: the key 'mode' again (first at line 4): give each field once");
}

TEST(TopologyParseErrorTest, TagsAreRefused) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "job_id: \"job-42\"", "job_id: !!binary am9iLTQy")),
            "topology.yaml:3:9: a YAML tag ('tag:yaml.org,2002:binary'): topology files hold none; "
            "write plain values, as ddlrun does");
  EXPECT_EQ(parse_error(replaced(kSmallText, "hosts:\n", "hosts: !!seq\n")),
            "topology.yaml:5:8: a YAML tag ('tag:yaml.org,2002:seq'): topology files hold none; "
            "write plain values, as ddlrun does");
}

TEST(TopologyParseErrorTest, DeepNestingIsNamed) {
  EXPECT_EQ(
      parse_error(replaced(kSmallText, "      - [1, 3]", "      - " + std::string(100000, '['))),
      "topology.yaml:21:15: YAML nested more than 16 levels deep; a topology file nests 5: "
      "is this the topology file ddlrun wrote?");
}

TEST(TopologyParseErrorTest, MissingFields) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "job_id: \"job-42\"\n", "")),
            "topology.yaml:2:1: job_id: missing");
  EXPECT_EQ(parse_error(replaced(kSmallText,
                                 "gpu: 1, gpu_bus_id: \"0004:05:00.0\", gpu_uuid: \"\", "
                                 "cpus: \"28",
                                 "gpu_bus_id: \"0004:05:00.0\", gpu_uuid: \"\", cpus: \"28")),
            "topology.yaml:10:5: ranks[1].gpu: missing");
  EXPECT_EQ(parse_error(replaced(kSmallText, "{index: 1, name: \"node02\", ", "{index: 1, ")),
            "topology.yaml:7:5: hosts[1].name: missing");
  EXPECT_EQ(parse_error(
                replaced(kSmallText, "{name: \"eth0\", kind: \"ethernet\", ", "{name: \"eth0\", ")),
            "topology.yaml:7:119: hosts[1].nics[1].kind: missing");
  EXPECT_EQ(
      parse_error(replaced(kSmallText, "    rings:\n      - [0, 2]", "    ring:\n      - [0, 2]")),
      "topology.yaml:19:5: ring_orders[1]: unknown field 'ring' (did you mean 'rings'?)");
}

TEST(TopologyParseErrorTest, WrongTypes) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "host: 1, gpu: 1", "host: 1, gpu: x")),
            "topology.yaml:12:44: ranks[3].gpu: expected an integer, got 'x'");
  EXPECT_EQ(
      parse_error(replaced(kSmallText, "{rank: 2, local_rank: 0", "{rank: 2.5, local_rank: 0")),
      "topology.yaml:11:12: ranks[2].rank: expected an integer, got '2.5'");
  EXPECT_EQ(parse_error(replaced(kSmallText, "{rank: 2, local_rank: 0",
                                 "{rank: 99999999999, local_rank: 0")),
            "topology.yaml:11:12: ranks[2].rank: expected an integer, got '99999999999'");
  EXPECT_EQ(parse_error(replaced(kSmallText, "local_rank: 1, host: 0", "local_rank: [1], host: 0")),
            "topology.yaml:10:27: ranks[1].local_rank: expected an integer, got a sequence");
  EXPECT_EQ(parse_error(replaced(kSmallText, "name: \"node01\"", "name: {first: node}")),
            "topology.yaml:6:22: hosts[0].name: expected a string, got a mapping");
  EXPECT_EQ(parse_error(replaced(kSmallText, "ranks:\n", "ranks:\n  - [0]\n")),
            "topology.yaml:9:5: ranks[0]: expected a mapping, got a sequence");
  EXPECT_EQ(parse_error(replaced(kSmallText, "      - [1, 3]", "      - [1, three]")),
            "topology.yaml:21:13: ring_orders[1].rings[1][1]: expected an integer, got 'three'");
  EXPECT_EQ(parse_error(replaced(kSmallText, "      - [2, 3]", "      - 2")),
            "topology.yaml:17:9: ring_orders[0].rings[1]: expected a sequence, got '2'");
}

TEST(TopologyParseErrorTest, Hosts) {
  std::string text(kSmallText);
  const size_t hosts = text.find("hosts:\n");
  text.replace(hosts, text.find("ranks:") - hosts, "hosts: none\n");
  EXPECT_EQ(parse_error(text), "topology.yaml:5:8: hosts: expected a sequence, got 'none'");
  text = replaced(text, "hosts: none", "hosts: {index: 0}");
  EXPECT_EQ(parse_error(text), "topology.yaml:5:8: hosts: expected a sequence, got a mapping");
}

TEST(TopologyParseErrorTest, UnknownFieldsInThisVersion) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "gpu_uuid: \"\", cpus: \"0-27\"",
                                 "gpu_uid: \"\", cpus: \"0-27\"")),
            "topology.yaml:11:75: ranks[2]: unknown field 'gpu_uid' (did you mean 'gpu_uuid'?)");
  EXPECT_EQ(parse_error(replaced(kSmallText, "ring_orders:", "rings_orders:")),
            "topology.yaml:13:1: unknown field 'rings_orders' (did you mean 'ring_orders'?)");
  EXPECT_EQ(parse_error(replaced(kSmallText, "mode: \"r:2x2\"\n", "mode: \"r:2x2\"\nzzz: 1\n")),
            "topology.yaml:5:1: unknown field 'zzz'");
}

TEST(TopologyParseErrorTest, BadValues) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "cpus: \"28-55,88-91\"", "cpus: \"28-55,91-88\"")),
            "topology.yaml:10:95: ranks[1].cpus: invalid CPU set '28-55,91-88': range 91-88 "
            "runs backwards");
  EXPECT_EQ(parse_error(replaced(kSmallText, "mode: \"r:2x2\"", "mode: \"q:2x2\"")),
            "topology.yaml:4:7: mode: invalid mode 'q:2x2': unknown algorithm 'q'; use one of r "
            "(ring), b (enhanced NCCL), n (NCCL), m (MPI), c (RCS), p (pick the best)");
  EXPECT_EQ(parse_error(replaced(kSmallText, "  - dimension: 1", "  - dimension: 2")),
            "topology.yaml:18:16: ring_orders[1].dimension: expected 1 (the dimensions come in "
            "order, innermost first), got '2'");
}

TEST(TopologyParseErrorTest, ValidationErrorsNameTheFile) {
  EXPECT_EQ(parse_error(replaced(kSmallText, "{rank: 2, local_rank: 0", "{rank: 1, local_rank: 0")),
            "topology.yaml: ranks[2]: rank 1 appears twice (also ranks[1]); ranks must be a "
            "permutation of 0..3");
  EXPECT_EQ(parse_error(replaced(kSmallText, "      - [1, 3]", "      - [1, 2]")),
            "topology.yaml: dimension 1: rank 2 is in ring 0 and ring 1; each rank is in exactly "
            "one ring of a dimension");
}

// ---------------------------------------------------------------------------------------------
// Validation: one test per rule, each failure's text.

TEST(TopologyValidateTest, TheSmallTopologyIsValid) {
  EXPECT_NO_THROW(validate(small_topology()));
}

TEST(TopologyValidateTest, NoRanks) {
  Topology t = small_topology();
  t.ranks.clear();
  EXPECT_EQ(validation_error(t), "the topology has no ranks");
}

TEST(TopologyValidateTest, HostIndices) {
  Topology t = small_topology();
  t.hosts[1].index = 2;
  EXPECT_EQ(validation_error(t),
            "hosts[1]: index 2 is out of range; with 2 hosts the indices are 0..1");
  t.hosts[1].index = 0;
  EXPECT_EQ(validation_error(t),
            "hosts[1]: index 0 appears twice (also hosts[0]); host indices must be a permutation "
            "of 0..1");
}

TEST(TopologyValidateTest, RanksArePermutation) {
  Topology t = small_topology();
  t.ranks[2].rank = 4;
  EXPECT_EQ(validation_error(t), "ranks[2]: rank 4 is out of range; with 4 ranks they are 0..3");
  t.ranks[2].rank = -1;
  EXPECT_EQ(validation_error(t), "ranks[2]: rank -1 is out of range; with 4 ranks they are 0..3");
  t.ranks[2].rank = 0;
  EXPECT_EQ(validation_error(t),
            "ranks[2]: rank 0 appears twice (also ranks[0]); ranks must be a permutation of 0..3");
}

TEST(TopologyValidateTest, HostOfARankExists) {
  Topology t = small_topology();
  t.ranks[3].host = 2;
  EXPECT_EQ(validation_error(t), "rank 3: host 2 is out of range; the hosts are 0..1");
  t.hosts.clear();
  EXPECT_EQ(validation_error(t), "rank 0: host 0 is out of range; the topology has no hosts");
}

TEST(TopologyValidateTest, LocalRanksArePermutationPerHost) {
  Topology t = small_topology();
  t.ranks[3].local_rank = 2;
  EXPECT_EQ(validation_error(t),
            "rank 3: local rank 2 is out of range on host 1 'node02', which runs 2 ranks (local "
            "ranks 0..1)");
  t.ranks[3].local_rank = 0;
  EXPECT_EQ(validation_error(t), "ranks 2 and 3 both have local rank 0 on host 1 'node02'");
  t = small_topology();
  t.ranks[1].host = 1;
  t.ranks[1].local_rank = 2;
  t.ranks[1].gpu = -1;
  t.ranks[0].local_rank = 1;
  EXPECT_EQ(validation_error(t),
            "rank 0: local rank 1 is out of range on host 0 'node01', which runs 1 rank (local "
            "rank 0)");
}

TEST(TopologyValidateTest, GpusAreNotShared) {
  Topology t = small_topology();
  t.ranks[3].gpu = 0;
  EXPECT_EQ(validation_error(t),
            "ranks 2 and 3 share GPU 0 on host 1 'node02'; each rank needs its own GPU");
  t.ranks[3].gpu = -2;
  EXPECT_EQ(validation_error(t), "rank 3: GPU -2 is not valid; use -1 for a rank without a GPU");
  t.ranks[2].gpu = -1;
  t.ranks[3].gpu = -1;
  EXPECT_NO_THROW(validate(t)) << "ranks without GPUs share nothing";
}

TEST(TopologyValidateTest, CpuSetsOnAHostAreDisjoint) {
  Topology t = small_topology();
  t.ranks[0].cpus = CpuSet::parse("0-27,90");
  EXPECT_EQ(validation_error(t),
            "ranks 0 and 1 on host 0 'node01' both hold PU 90 (CPU sets '0-27,90' and "
            "'28-55,88-91'); CPU sets on one host must be disjoint");
  t = small_topology();
  t.ranks[3].cpus = CpuSet::parse("4-8");
  EXPECT_EQ(validation_error(t),
            "ranks 2 and 3 on host 1 'node02' both hold PU 4 (CPU sets '0-27' and '4-8'); CPU "
            "sets on one host must be disjoint");
  t.ranks[3].cpus = CpuSet::parse("28-29");
  EXPECT_NO_THROW(validate(t)) << "the same PUs on different hosts are fine";
}

TEST(TopologyValidateTest, ModeMatchesTheRanks) {
  Topology t = small_topology();
  t.mode = Mode{Algorithm::kRing, {}};
  EXPECT_EQ(validation_error(t),
            "mode 'r' has no dimensions; a topology needs them, e.g. 'r:4' for one ring of all "
            "ranks");
  t.mode = Mode{Algorithm::kExplore, {6, 2, 1, 1}};
  EXPECT_EQ(validation_error(t),
            "mode 'p:6x2x1x1' describes 12 ranks (6 x 2 x 1 x 1), but the topology has 4");
  t.mode = Mode{Algorithm::kExplore, {8}};
  EXPECT_EQ(validation_error(t), "mode 'p:8' describes 8 ranks, but the topology has 4");
  t.mode = Mode{Algorithm::kExplore, {4, 0}};
  EXPECT_EQ(validation_error(t), "mode 'p:4x0': dimension 1 is 0; each must be at least 1");
  t.mode = Mode{Algorithm::kExplore, {65536, 65536, 65536}};
  EXPECT_EQ(validation_error(t),
            "mode 'p:65536x65536x65536' describes more than 2147483647 ranks (65536 x 65536 x "
            "65536), but the topology has 4");
}

TEST(TopologyValidateTest, RingsCoverEveryDimension) {
  Topology t = small_topology();
  t.rings.pop_back();
  EXPECT_EQ(validation_error(t), "the ring orders cover 1 dimension, but mode 'r:2x2' has 2");
}

TEST(TopologyValidateTest, RingSizeIsTheDimension) {
  Topology t = small_topology();
  t.rings[1] = {{0, 2, 1}, {3}};
  EXPECT_EQ(validation_error(t),
            "dimension 1, ring 0 has 3 ranks; mode 'r:2x2' makes rings of 2 in dimension 1");
  t.rings[1] = {{0, 2}, {}};
  EXPECT_EQ(validation_error(t),
            "dimension 1, ring 1 has 0 ranks; mode 'r:2x2' makes rings of 2 in dimension 1");
}

TEST(TopologyValidateTest, RingMembersAreRanks) {
  Topology t = small_topology();
  t.rings[0][1] = {2, 4};
  EXPECT_EQ(validation_error(t), "dimension 0, ring 1: rank 4 is out of range; the ranks are 0..3");
}

TEST(TopologyValidateTest, ARingHoldsEachMemberOnce) {
  Topology t = small_topology();
  t.rings[0][1] = {3, 3};
  EXPECT_EQ(validation_error(t),
            "dimension 0, ring 1 holds rank 3 twice; a ring holds each rank once");
}

TEST(TopologyValidateTest, RingsOfADimensionPartitionTheRanks) {
  Topology t = small_topology();
  t.rings[1] = {{0, 2}, {2, 1}};
  EXPECT_EQ(validation_error(t),
            "dimension 1: rank 2 is in ring 0 and ring 1; each rank is in exactly one ring of a "
            "dimension");
  t.rings[1] = {{0, 2}};
  EXPECT_EQ(validation_error(t),
            "dimension 1: rank 1 is in no ring; each rank is in exactly one ring of a dimension");
}

// ---------------------------------------------------------------------------------------------
// Files

// A file larger than kMaxTopologyBytes is refused before it is read (a sparse file: no disk).
TEST_F(TopologyFileTest, AHugeFileIsRefusedBeforeItIsRead) {
  const std::string file = path("huge.yaml");
  { std::ofstream(file) << "version: \"1.0\"\n"; }
  fs::resize_file(file, kMaxTopologyBytes + 1);
  try {
    read_topology_file(file);
    FAIL() << "a huge file was read";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()),
              file +
                  ": 268435457 bytes, more than the 268435456 a topology file may have "
                  "(ddlrun writes a few hundred bytes a rank); is this the topology file "
                  "ddlrun wrote?");
  }
}

// A FIFO would block open() itself (beyond DDL_TIMEOUT) and /dev/zero never ends: both are
// refused by their type, before a byte is read.
TEST_F(TopologyFileTest, AnythingButARegularFileIsRefusedByItsType) {
  const std::string fifo = path("fifo.yaml");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const auto error = [](const std::string& file) -> std::string {
    try {
      read_topology_file(file);
    } catch (const TopologyError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error(fifo), "topology file '" + fifo +
                             "' is a FIFO, not a regular file: give DDL_TOPOLOGY_FILE the file "
                             "ddlrun wrote");
  EXPECT_EQ(error("/dev/zero"),
            "topology file '/dev/zero' is a character device, not a regular file: give "
            "DDL_TOPOLOGY_FILE the file ddlrun wrote");
  EXPECT_EQ(error(dir_), "topology file '" + dir_ +
                             "' is a directory, not a regular file: give DDL_TOPOLOGY_FILE the "
                             "file ddlrun wrote");
}

TEST_F(TopologyFileTest, RoundTrip) {
  const Topology t = small_topology();
  write_topology_file(t, path("topology.yaml"));
  EXPECT_EQ(read_topology_file(path("topology.yaml")), t);
  EXPECT_EQ(slurp(path("topology.yaml")), kSmallText);
}

TEST_F(TopologyFileTest, RoundTripsALargeJob) {
  Topology t;
  t.job_id = "large";
  t.mode = Mode{Algorithm::kExplore, {6, 18, 4, 1}};
  for (int h = 0; h < 72; ++h) {
    t.hosts.push_back({h, "n" + std::to_string(h), "10.0.0." + std::to_string(h), {}});
    for (int g = 0; g < 6; ++g) {
      t.ranks.push_back({h * 6 + g, g, h, g, "0004:0" + std::to_string(g) + ":00.0", "",
                         CpuSet::parse(std::to_string(g * 28) + "-" + std::to_string(g * 28 + 27)),
                         "ib" + std::to_string(g / 3), "10.1.0." + std::to_string(h)});
    }
  }
  t.rings = default_rings(t.mode.dims);
  write_topology_file(t, path("large.yaml"));
  EXPECT_EQ(read_topology_file(path("large.yaml")), t);
  EXPECT_EQ(parse_topology_fast(slurp(path("large.yaml")), "large.yaml"), t);
  EXPECT_EQ(parse_topology_generic(slurp(path("large.yaml")), "large.yaml"), t);
}

// small_topology() with what --probe-links would measure: two racks of one host each.
Topology measured_topology() {
  Topology t = small_topology();
  t.links = LinkMeasurement{
      0.25, {{0}, {1}}, {{"uplink", 31250000.5, 0.000125}}, {{0, 1, 31250000.5, 0.000125}}};
  return t;
}

constexpr std::string_view kLinksText = R"(links:
  seconds: 0.25
  racks:
    - [0]
    - [1]
  levels:
    - {name: "uplink", bytes_per_s: 31250000.5, latency_s: 0.000125}
  pairs:
    - {a: 0, b: 1, bytes_per_s: 31250000.5, latency_s: 0.000125}
)";

TEST_F(TopologyFileTest, RoundTripsMeasuredLinksAsFormat11) {
  const Topology t = measured_topology();
  write_topology_file(t, path("links.yaml"));
  const std::string text = slurp(path("links.yaml"));
  EXPECT_EQ(text, replaced(std::string(kSmallText), "version: \"1.0\"", "version: \"1.1\"") +
                      std::string(kLinksText));
  EXPECT_EQ(read_topology_file(path("links.yaml")), t);
  EXPECT_EQ(parse_topology_fast(text, "links.yaml"), t) << "written files take the fast path";
  EXPECT_EQ(parse_topology_generic(text, "links.yaml"), t);
}

TEST(TopologyVersionTest, AFormat10ReaderReadsAFormat11FileWithoutItsLinks) {
  // A 1.0 reader knows no `links:`: the fast reader stops there and hands the text to yaml-cpp,
  // which ignores the fields of a newer minor version. The same holds for any newer minor.
  const std::string text =
      replaced(format_topology(measured_topology()), "version: \"1.1\"", "version: \"1.9\"") +
      "fabric: {switches: 3}\n";
  EXPECT_EQ(parse_topology_fast(text, "t.yaml"), std::nullopt);
  EXPECT_EQ(parse_topology(text, "t.yaml"), measured_topology());
}

TEST(TopologyParseErrorTest, MeasuredLinks) {
  const std::string text = format_topology(measured_topology());
  EXPECT_EQ(parse_error(replaced(text, "seconds: 0.25", "seconds: soon")),
            "topology.yaml:23:12: links.seconds: expected a number of at least 0, got 'soon'");
  EXPECT_EQ(parse_error(replaced(text, "    - [1]\n", "    - [0]\n")),
            "topology.yaml: links: host 0 is in rack 0 and in rack 1");
  EXPECT_EQ(parse_error(replaced(text, "{a: 0, b: 1,", "{a: 0, b: 7,")),
            "topology.yaml: links: the pair 0-7 names host 7, which is not among the hosts");
  EXPECT_EQ(
      parse_error(replaced(text, "  levels:\n    - {name: \"uplink\", ", "  levels:\n    - {")),
      "topology.yaml:28:7: links.levels[0].name: missing");
}

TEST_F(TopologyFileTest, IsOwnerOnly) {
  const mode_t old_umask = umask(0);
  write_topology_file(small_topology(), path("topology.yaml"));
  umask(old_umask);
  struct stat st {};
  ASSERT_EQ(stat(path("topology.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(TopologyFileTest, ReplacesAtomically) {
  const std::string file = path("topology.yaml");
  Topology first = small_topology();
  write_topology_file(first, file);
  struct stat before {};
  ASSERT_EQ(stat(file.c_str(), &before), 0);
  const int old_fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(old_fd, 0);

  Topology second = small_topology();
  second.job_id = "job-43";
  write_topology_file(second, file);
  struct stat after {};
  ASSERT_EQ(stat(file.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "the file was rewritten in place, not renamed over";
  EXPECT_EQ(read_topology_file(file), second);
  EXPECT_EQ(entries(), std::vector<std::string>{"topology.yaml"}) << "a temporary file was left";

  // A reader that opened the old file still reads all of it.
  std::string old_text(kSmallText.size() + 16, '\0');
  const ssize_t n = read(old_fd, old_text.data(), old_text.size());
  close(old_fd);
  ASSERT_GE(n, 0);
  old_text.resize(static_cast<size_t>(n));
  EXPECT_EQ(old_text, kSmallText);
}

TEST_F(TopologyFileTest, WriteErrorsNameThePath) {
  const std::string missing_dir = path("no/such/dir/topology.yaml");
  try {
    write_topology_file(small_topology(), missing_dir);
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write topology file '" + missing_dir +
                                         "': cannot create a temporary file in '" +
                                         path("no/such/dir") + "': No such file or directory");
  }
  fs::create_directory(path("sub"));
  try {
    write_topology_file(small_topology(), path("sub"));
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write topology file '" + path("sub") + "': rename: Is a directory");
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"sub"}) << "a temporary file was left";
}

TEST_F(TopologyFileTest, RefusesToWriteAnInvalidPlan) {
  Topology t = small_topology();
  t.ranks[1].gpu = 0;
  try {
    write_topology_file(t, path("topology.yaml"));
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()), "refusing to write topology file '" + path("topology.yaml") +
                                         "': ranks 0 and 1 share GPU 0 on host 0 'node01'; each "
                                         "rank needs its own GPU");
  }
  EXPECT_TRUE(entries().empty());
}

TEST_F(TopologyFileTest, ReadErrorsNameThePath) {
  try {
    read_topology_file(path("missing.yaml"));
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read topology file '" + path("missing.yaml") +
                                         "': No such file or directory");
  }
  std::ofstream(path("bad.yaml")) << replaced(kSmallText, "host: 1, gpu: 1", "host: 1, gpu: x");
  try {
    read_topology_file(path("bad.yaml"));
    FAIL() << "no error";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()),
              path("bad.yaml") + ":12:44: ranks[3].gpu: expected an integer, got 'x'");
  }
}

TEST_F(TopologyFileTest, ReadsAHandWrittenFile) {
  std::ofstream(path("example.yaml")) << kHandWritten;
  EXPECT_EQ(read_topology_file(path("example.yaml")), small_topology());
}

}  // namespace
}  // namespace ddl::comm
