// libddl's environment table and its registry of allreduce algorithms, checked against
// libddl(3): every variable of the table has its entry in ENVIRONMENT with the default it states,
// every variable the user sets is in the table (or read where it is used, listed below),
// DDL_ALGO's entry and ALGORITHMS name exactly the registry's rows, and the Identity entries
// exactly the rank variables libddl reads (comm/bootstrap/rank_variables.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/bootstrap/rank_variables.h"
#include "comm/core/communicator.h"

namespace ddl::comm {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// One roff line as it reads: escapes and font macros gone; .BR-style macros join their
/// arguments, .B and .I separate them with blanks.
std::string plain(const std::string& line) {
  std::string text = line;
  bool join = false;
  if (!text.empty() && text[0] == '.') {
    const size_t space = text.find(' ');
    const std::string macro = text.substr(1, space == std::string::npos ? text.size() : space - 1);
    if (macro != "B" && macro != "I" && macro.size() != 2) return "";
    join = macro.size() == 2;
    text = space == std::string::npos ? "" : text.substr(space + 1);
  }
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "\\-") == 0) {
      out += '-';
      ++i;
    } else if (text.compare(i, 2, "\\f") == 0 && i + 2 < text.size()) {
      i += 2;
    } else if (text.compare(i, 2, "\\(") == 0 && i + 3 < text.size()) {
      out += '?';
      i += 3;
    } else if (text.compare(i, 2, "\\|") == 0 || text.compare(i, 2, "\\&") == 0) {
      ++i;
    } else if (text[i] == '"') {
      quoted = !quoted;
    } else if (text[i] == ' ' && join && !quoted) {
      continue;
    } else {
      out += text[i];
    }
  }
  return out;
}

/// The .TP entries of section `section` of the page: tag line -> body, both plain, the body's
/// lines joined by blanks. `subsection` ("" for all) keeps those under that .SS only.
std::map<std::string, std::string> entries(const std::string& page, const std::string& section,
                                           const std::string& subsection = "") {
  std::map<std::string, std::string> out;
  std::istringstream in(page);
  bool in_section = false, in_sub = subsection.empty(), tag_next = false;
  std::string tag;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(".SH", 0) == 0) {
      in_section = plain(line.substr(4)) == section;
      tag.clear();
      continue;
    }
    if (!in_section) continue;
    if (line.rfind(".SS", 0) == 0) {
      in_sub = subsection.empty() || plain(line.substr(4)) == subsection;
      tag.clear();
      continue;
    }
    if (!in_sub) continue;
    if (line.rfind(".TP", 0) == 0) {
      tag_next = true;
      continue;
    }
    if (line.rfind(".PP", 0) == 0) {
      tag.clear();
    } else if (tag_next) {
      tag = plain(line);
      out[tag];
      tag_next = false;
    } else if (!tag.empty()) {
      out[tag] += plain(line) + " ";
    }
  }
  return out;
}

/// The entry whose tag names variable `name` ("DDL_TIMEOUT=seconds", "DDL_RANK, DDL_SIZE").
const std::string* entry_of(const std::map<std::string, std::string>& all,
                            const std::string& name) {
  for (const auto& [tag, body] : all) {
    if (tag.rfind(name, 0) == 0 && (tag.size() == name.size() ||
                                    std::string("=, ").find(tag[name.size()]) != std::string::npos))
      return &body;
  }
  return nullptr;
}

std::string man_page() {
  return read(std::string(DDL_TEST_DATA_DIR) + "/../man/libddl.3");
}

TEST(SettingsTest, EveryVariableOfTheTableHasItsManEntryWithItsDefault) {
  const auto all = entries(man_page(), "ENVIRONMENT");
  ASSERT_FALSE(all.empty());
  for (const Setting& s : settings()) {
    const std::string* body = entry_of(all, std::string(s.name));
    ASSERT_NE(body, nullptr) << s.name << " is read but has no .TP entry in libddl(3) ENVIRONMENT";
    EXPECT_NE(body->find(s.fallback), std::string::npos)
        << s.name << "'s entry does not say '" << s.fallback << "': " << *body;
    EXPECT_FALSE(s.doc.empty()) << s.name;
  }
}

TEST(SettingsTest, EveryVariableTheUserSetsIsInTheTable) {
  // Read where they are used: by the Python package, by the NCCL loader, by ddl_init().
  const std::set<std::string> elsewhere = {"DDL_AUTOWRAP", "DDL_STALL_SECONDS", "DDL_NCCL",
                                           "DDL_ALLOW_SINGLE"};
  std::set<std::string> table;
  for (const Setting& s : settings())
    table.insert(std::string(s.name));
  const auto user = entries(man_page(), "ENVIRONMENT", "Set by the user");
  ASSERT_FALSE(user.empty());
  for (const auto& [tag, body] : user) {
    const std::string name = tag.substr(0, tag.find_first_of("=, "));
    EXPECT_TRUE(table.count(name) || elsewhere.count(name))
        << name << " is documented in libddl(3) but not in comm/core/settings.cc's table";
  }
}

TEST(SettingsTest, DdlAlgoAndAlgorithmsNameExactlyTheRegistry) {
  std::string words = "auto";
  for (const AllreduceAlgorithm& a : allreduce_algorithms())
    words += "|" + std::string(a.name);
  const std::string page = man_page();
  EXPECT_NE(entry_of(entries(page, "ENVIRONMENT"), "DDL_ALGO={" + words + "}"), nullptr)
      << "libddl(3) ENVIRONMENT should have the entry DDL_ALGO={" << words << "}";
  const auto algorithms = entries(page, "ALGORITHMS");
  std::set<std::string> named;
  for (const auto& [tag, body] : algorithms) {
    const size_t at = body.find("(DDL_ALGO=");
    if (at != std::string::npos) named.insert(body.substr(at + 10, body.find(')', at) - at - 10));
  }
  std::set<std::string> rows;
  for (const AllreduceAlgorithm& a : allreduce_algorithms())
    rows.insert(std::string(a.name));
  EXPECT_EQ(named, rows) << "each row of the registry has its entry in libddl(3) ALGORITHMS";
}

TEST(SettingsTest, TheIdentityVariablesAreTheRowsLibddlReads) {
  std::set<std::string> documented;
  for (const auto& [tag, body] : entries(man_page(), "ENVIRONMENT", "Identity"))
    if (tag.rfind("PMIX_", 0) != 0) documented.insert(tag);
  std::set<std::string> rows;
  for (const RankVariable* v : rank_variables_of(&RankVariable::identity))
    rows.insert(std::string(v->rank) + ", " + std::string(v->size));
  EXPECT_EQ(documented, rows) << "libddl(3) ENVIRONMENT, Identity: one entry per rank variable";
}

TEST(SettingsTest, NumbersAreClampedIntoTheirRows) {
  setenv("DDL_SHM_CHUNK_BYTES", "1", 1);
  setenv("DDL_BUCKET_BYTES", "0", 1);
  setenv("DDL_TIMEOUT", "2.5", 1);
  const CommOptions o = options_from_environment();
  unsetenv("DDL_SHM_CHUNK_BYTES");
  unsetenv("DDL_BUCKET_BYTES");
  unsetenv("DDL_TIMEOUT");
  EXPECT_EQ(o.shm_chunk_bytes, 4096u);
  EXPECT_EQ(o.bucket_bytes, 1u);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(2500));
}

TEST(SettingsTest, AnEmptyVariableCountsAsUnset) {
  setenv("DDL_ALGO", "", 1);
  setenv("DDL_SHM", "", 1);
  const CommOptions o = options_from_environment();
  unsetenv("DDL_ALGO");
  unsetenv("DDL_SHM");
  EXPECT_EQ(o.algo, nullptr);
  EXPECT_TRUE(o.shm);
}

TEST(AlgorithmsTest, AMisspelledNameGetsDidYouMeanAndTheList) {
  try {
    find_allreduce("rign");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "$DDL_ALGO is 'rign' (did you mean 'ring'?); expected auto, shm, ring, "
                 "multiring or rd");
  }
  setenv("DDL_ALGO", "multi", 1);
  try {
    options_from_environment();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "$DDL_ALGO is 'multi'; expected auto, shm, ring, multiring or rd");
  }
  setenv("DDL_ALGO", "Auto", 1);
  try {
    options_from_environment();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "$DDL_ALGO is 'Auto' (did you mean 'auto'?); expected auto, shm, ring, "
                 "multiring or rd");
  }
  unsetenv("DDL_ALGO");
}

/// The name of the row choose_allreduce() picks.
std::string chosen(const char* named, AllreduceShape s) {
  return std::string(choose_allreduce(find_allreduce(named), s).name);
}

TEST(AlgorithmsTest, TheAutomaticChoiceAsksTheRowsInTheirOrder) {
  AllreduceShape s;
  s.small_bytes = 100;
  s.bytes = 99;
  EXPECT_EQ(chosen("auto", s), "rd");
  s.one_host = true;
  EXPECT_EQ(chosen("auto", s), "shm");
  s.one_host = false;
  s.bytes = 100;
  EXPECT_EQ(chosen("auto", s), "ring");
  s.rings = 1;
  s.dimensions = 2;  // one long ring as two sub-rings
  EXPECT_EQ(chosen("auto", s), "multiring");
}

TEST(AlgorithmsTest, ANamedRowThatCannotRunGivesWay) {
  AllreduceShape s;
  s.small_bytes = 100;
  s.bytes = 10;
  EXPECT_EQ(chosen("shm", s), "rd");  // across hosts: auto
  s.one_host = true;
  EXPECT_EQ(chosen("shm", s), "shm");
  EXPECT_EQ(chosen("ring", s), "ring");
  s.one_host = false;
  EXPECT_EQ(chosen("multiring", s), "ring");  // no topology
  s.rings = 1;
  s.dimensions = 1;
  EXPECT_EQ(chosen("multiring", s), "multiring");
}

TEST(AlgorithmsTest, RoutesAreOnePerRowAndNamedAsTheRows) {
  std::set<uint8_t> routes = {kRouteDefault, kRouteDevice};
  for (const AllreduceAlgorithm& a : allreduce_algorithms()) {
    EXPECT_TRUE(routes.insert(route_of(a.name)).second) << a.name;
    EXPECT_EQ(route_name(route_of(a.name)), a.name);
    EXPECT_NE(a.run, nullptr) << a.name;
  }
  EXPECT_EQ(route_name(kRouteDefault), "default");
  EXPECT_EQ(route_name(kRouteDevice), "nccl on GPU memory");
}

}  // namespace
}  // namespace ddl::comm
