// The plan's YAML writer (ddlrun/show/report.cc: to_yaml): its exact layout on a small document,
// and that yaml-cpp reads back every value of a hostile one as written.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "ddlrun/show/report.h"

namespace ddl::ddlrun {
namespace {

TEST(ReportYaml, LayoutOfNestedBlocks) {
  const Value doc = Value::Map{
      {"name", "a"},
      {"hosts",
       Value::List{Value::Map{{"name", "n1"}, {"ranks", Value::List{0, 1}}}, Value::Map{}}},
      {"rings", Value::List{Value::List{0, 1}, Value::List{}}},
      {"empty", Value::List{}},
      {"none", Value()},
      {"nested", Value::Map{{"x", 1.5}, {"on", true}}},
  };
  EXPECT_EQ(to_yaml(doc),
            "name: a\n"
            "hosts:\n"
            "  - name: n1\n"
            "    ranks:\n"
            "      - 0\n"
            "      - 1\n"
            "  - {}\n"
            "rings:\n"
            "  -\n"
            "    - 0\n"
            "    - 1\n"
            "  - []\n"
            "empty: []\n"
            "none: ~\n"
            "nested:\n"
            "  x: 1.5\n"
            "  \"on\": true\n");
}

TEST(ReportYaml, ScalarsReadBackAsWritten) {
  const std::string hostile[] = {"",
                                 "yes",
                                 "No",
                                 "null",
                                 "~",
                                 "-1",
                                 "12",
                                 "a: b",
                                 "# c",
                                 "x\ny",
                                 "tab\there",
                                 "quote\"s",
                                 "back\\",
                                 "\x01\x7f",
                                 "\xc2\x85\xc2\x9f",
                                 "\xef\xbb\xbf"
                                 "bom",
                                 "caf\xc3\xa9",
                                 "[list]",
                                 "{map}",
                                 "& anchor",
                                 "* alias",
                                 "! tag",
                                 "%dir",
                                 "@at",
                                 "`tick",
                                 "- dash",
                                 "/abs/path",
                                 "plain.name-1"};
  Value::List items;
  for (const std::string& s : hostile)
    items.emplace_back(s);
  const Value doc = Value::Map{{"strings", items}, {"keys", Value::Map{{"yes", 1}, {"a: b", 2}}}};
  const YAML::Node read = YAML::Load(to_yaml(doc));
  ASSERT_EQ(read["strings"].size(), std::size(hostile));
  for (size_t i = 0; i < std::size(hostile); ++i)
    EXPECT_EQ(read["strings"][i].as<std::string>(), hostile[i]) << "item " << i;
  EXPECT_EQ(read["keys"]["yes"].as<int>(), 1);
  EXPECT_EQ(read["keys"]["a: b"].as<int>(), 2);
}

TEST(ReportYaml, InvalidUtf8IsReplacedNotWrittenRaw) {
  const std::string yaml = to_yaml(Value::Map{{"arg", "\xff"}});
  EXPECT_EQ(yaml, "arg: \"\xef\xbf\xbd\"\n");
}

TEST(ReportYaml, GeneratedListsAreWrittenItemByItem) {
  Value::Generated gen;
  gen.count = 3;
  gen.item = [](size_t i) { return Value(Value::Map{{"rank", static_cast<int64_t>(i)}}); };
  EXPECT_EQ(to_yaml(Value::Map{{"placement", gen}}),
            "placement:\n  - rank: 0\n  - rank: 1\n  - rank: 2\n");
  EXPECT_EQ(to_yaml(Value::Map{{"placement", Value::Generated{}}}), "placement: []\n");
}

}  // namespace
}  // namespace ddl::ddlrun
