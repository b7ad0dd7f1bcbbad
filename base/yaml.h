#pragma once
// Pieces every YAML reader of ours shares (the topology file, inventories): where a node lies,
// what it is, and field paths. For .cc files only: yaml-cpp stays out of public headers.

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

namespace ddl::base {

/// "SOURCE:LINE:COLUMN" (1-based) where `mark` lies, or "SOURCE" when it is null.
std::string yaml_position(std::string_view source, const YAML::Mark& mark);

/// The words a reader uses for YAML's kinds of node.
struct YamlWords {
  std::string_view map = "a mapping";
  std::string_view sequence = "a sequence";
};

/// What `node` is, for "expected X, got ...": the map or sequence word, 'its text', "nothing".
std::string yaml_describe(const YAML::Node& node, const YamlWords& words = {});

/// "PATH.KEY", or "KEY" at the top.
std::string yaml_join(std::string_view path, std::string_view key);

}  // namespace ddl::base
