#include "base/yaml.h"

#include <gtest/gtest.h>

namespace ddl::base {
namespace {

TEST(Yaml, PositionIsOneBased) {
  const YAML::Node root = YAML::Load("a: 1\nb:\n  c: [1, 2]\n");
  EXPECT_EQ(yaml_position("plan.yaml", root["b"]["c"].Mark()), "plan.yaml:3:6");
  EXPECT_EQ(yaml_position("plan.yaml", YAML::Mark::null_mark()), "plan.yaml");
}

TEST(Yaml, DescribesEachKindOfNodeInTheReadersWords) {
  const YAML::Node root = YAML::Load("m: {x: 1}\ns: [1]\nt: text\nn: ~\n");
  EXPECT_EQ(yaml_describe(root["m"]), "a mapping");
  EXPECT_EQ(yaml_describe(root["s"]), "a sequence");
  EXPECT_EQ(yaml_describe(root["m"], {.map = "a map", .sequence = "a list"}), "a map");
  EXPECT_EQ(yaml_describe(root["s"], {.map = "a map", .sequence = "a list"}), "a list");
  EXPECT_EQ(yaml_describe(root["t"]), "'text'");
  EXPECT_EQ(yaml_describe(root["n"]), "nothing");
}

TEST(Yaml, JoinsFieldPaths) {
  EXPECT_EQ(yaml_join("", "hosts"), "hosts");
  EXPECT_EQ(yaml_join("hosts[2]", "nics"), "hosts[2].nics");
}

}  // namespace
}  // namespace ddl::base
