#pragma once

// The typed reads that the yaml-cpp readers of a topology file share (yaml_reader.cc's whole
// file, links.cc's `links:` section). Internal to libddl's topology code.

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "base/yaml.h"
#include "comm/topology/internal.h"

namespace ddl::comm::topology {

/// Reads the fields of a topology file's YAML nodes; what it refuses is a TopologyError
/// "SOURCE:LINE:COLUMN: FIELD: problem".
class YamlFields {
 public:
  explicit YamlFields(const std::string& source) : source_(source) {}

 protected:
  std::string at(const YAML::Mark& mark) const { return base::yaml_position(source_, mark) + ": "; }

  static std::string describe(const YAML::Node& node) { return base::yaml_describe(node); }

  static std::string join(const std::string& where, std::string_view key) {
    return base::yaml_join(where, key);
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& problem) const {
    throw TopologyError(at(node.Mark()) + field + ": " + problem);
  }

  YAML::Node mapping(const YAML::Node& node, const std::string& field) const {
    if (!node.IsMap()) fail(node, field, "expected a mapping, got " + describe(node));
    return node;
  }

  YAML::Node sequence(const YAML::Node& node, const std::string& field) const {
    if (!node.IsSequence()) fail(node, field, "expected a sequence, got " + describe(node));
    return node;
  }

  /// `map`'s `key`, named `where.key` when it is missing.
  YAML::Node required(const YAML::Node& map, const std::string& where, std::string_view key) const {
    YAML::Node node = map[std::string(key)];
    if (!node) fail(map, join(where, key), "missing");
    return node;
  }

  int integer(const YAML::Node& node, const std::string& field) const {
    int value = 0;
    if (!node.IsScalar() || !parse_int(node.Scalar(), value)) {
      fail(node, field, "expected an integer, got " + describe(node));
    }
    return value;
  }

  /// A scalar's text; a null node is "" when `null_ok`, else refused.
  std::string string(const YAML::Node& node, const std::string& field, bool null_ok = true) const {
    if (null_ok && node.IsNull()) return {};
    if (!node.IsScalar()) fail(node, field, "expected a string, got " + describe(node));
    return node.Scalar();
  }

  const std::string& source_;
};

}  // namespace ddl::comm::topology
