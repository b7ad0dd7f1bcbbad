// read_links: the `links:` section of a topology file (format 1.1), what --probe-links measured.
// Both readers hand it to yaml-cpp: it holds a few lines per host pair, never per rank.

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "base/yaml.h"
#include "comm/topology/internal.h"

namespace ddl::comm::topology {

namespace {

class LinksReader {
 public:
  explicit LinksReader(const std::string& source) : source_(source) {}

  LinkMeasurement read(const YAML::Node& node) {
    map(node, "links");
    LinkMeasurement links;
    links.seconds = number(required(node, "links", "seconds"), "links.seconds");
    size_t i = 0;
    for (const YAML::Node& rack : list(required(node, "links", "racks"), "links.racks")) {
      const std::string field = "links.racks[" + std::to_string(i++) + "]";
      std::vector<int>& hosts = links.racks.emplace_back();
      for (const YAML::Node& host : list(rack, field))
        hosts.push_back(integer(host, field + "[" + std::to_string(hosts.size()) + "]"));
    }
    i = 0;
    for (const YAML::Node& level : list(required(node, "links", "levels"), "links.levels")) {
      const std::string where = "links.levels[" + std::to_string(i++) + "]";
      map(level, where);
      links.levels.push_back(
          MeasuredLevel{text(required(level, where, "name"), where + ".name"),
                        number(required(level, where, "bytes_per_s"), where + ".bytes_per_s"),
                        number(required(level, where, "latency_s"), where + ".latency_s")});
    }
    i = 0;
    for (const YAML::Node& pair : list(required(node, "links", "pairs"), "links.pairs"))
      links.pairs.push_back(sample(pair, "links.pairs[" + std::to_string(i++) + "]"));
    return links;
  }

 private:
  LinkSample sample(const YAML::Node& pair, const std::string& where) const {
    map(pair, where);
    return LinkSample{integer(required(pair, where, "a"), where + ".a"),
                      integer(required(pair, where, "b"), where + ".b"),
                      number(required(pair, where, "bytes_per_s"), where + ".bytes_per_s"),
                      number(required(pair, where, "latency_s"), where + ".latency_s")};
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& problem) const {
    throw TopologyError(base::yaml_position(source_, node.Mark()) + ": " + field + ": " + problem);
  }

  void map(const YAML::Node& node, const std::string& field) const {
    if (!node.IsMap()) fail(node, field, "expected a mapping, got " + base::yaml_describe(node));
  }

  YAML::Node list(const YAML::Node& node, const std::string& field) const {
    if (!node.IsSequence()) {
      fail(node, field, "expected a sequence, got " + base::yaml_describe(node));
    }
    return node;
  }

  YAML::Node required(const YAML::Node& map, const std::string& where, const char* key) const {
    YAML::Node node = map[key];
    if (!node) fail(map, where + "." + key, "missing");
    return node;
  }

  int integer(const YAML::Node& node, const std::string& field) const {
    int value = 0;
    if (!node.IsScalar() || !parse_int(node.Scalar(), value)) {
      fail(node, field, "expected an integer, got " + base::yaml_describe(node));
    }
    return value;
  }

  double number(const YAML::Node& node, const std::string& field) const {
    double value = 0;
    const std::string s = node.IsScalar() ? node.Scalar() : std::string();
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !(value >= 0)) {
      fail(node, field, "expected a number of at least 0, got " + base::yaml_describe(node));
    }
    return value;
  }

  std::string text(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "expected a string, got " + base::yaml_describe(node));
    return node.Scalar();
  }

  const std::string& source_;
};

}  // namespace

LinkMeasurement read_links(const YAML::Node& links, const std::string& source) {
  return LinksReader(source).read(links);
}

}  // namespace ddl::comm::topology
