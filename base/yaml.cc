#include "base/yaml.h"

namespace ddl::base {

std::string yaml_position(std::string_view source, const YAML::Mark& mark) {
  std::string out(source);
  if (mark.is_null()) return out;
  return out + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string yaml_describe(const YAML::Node& node, const YamlWords& words) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return std::string(words.map);
    case YAML::NodeType::Sequence:
      return std::string(words.sequence);
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    default:
      return "nothing";
  }
}

std::string yaml_join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

}  // namespace ddl::base
