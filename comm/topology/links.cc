// read_links: the `links:` section of a topology file (format 1.1), what --probe-links measured.
// Both readers hand it to yaml-cpp: it holds a few lines per host pair, never per rank.

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "base/yaml.h"
#include "comm/topology/internal.h"
#include "comm/topology/yaml_fields.h"

namespace ddl::comm::topology {

namespace {

class LinksReader : YamlFields {
 public:
  using YamlFields::YamlFields;

  LinkMeasurement read(const YAML::Node& node) {
    mapping(node, "links");
    LinkMeasurement links;
    links.seconds = number(required(node, "links", "seconds"), "links.seconds");
    size_t i = 0;
    for (const YAML::Node& rack : sequence(required(node, "links", "racks"), "links.racks")) {
      const std::string field = "links.racks[" + std::to_string(i++) + "]";
      std::vector<int>& hosts = links.racks.emplace_back();
      for (const YAML::Node& host : sequence(rack, field))
        hosts.push_back(integer(host, field + "[" + std::to_string(hosts.size()) + "]"));
    }
    i = 0;
    for (const YAML::Node& level : sequence(required(node, "links", "levels"), "links.levels")) {
      const std::string where = "links.levels[" + std::to_string(i++) + "]";
      mapping(level, where);
      links.levels.push_back(
          MeasuredLevel{string(required(level, where, "name"), where + ".name", false),
                        number(required(level, where, "bytes_per_s"), where + ".bytes_per_s"),
                        number(required(level, where, "latency_s"), where + ".latency_s")});
    }
    i = 0;
    for (const YAML::Node& pair : sequence(required(node, "links", "pairs"), "links.pairs"))
      links.pairs.push_back(sample(pair, "links.pairs[" + std::to_string(i++) + "]"));
    return links;
  }

 private:
  LinkSample sample(const YAML::Node& pair, const std::string& where) const {
    mapping(pair, where);
    return LinkSample{integer(required(pair, where, "a"), where + ".a"),
                      integer(required(pair, where, "b"), where + ".b"),
                      number(required(pair, where, "bytes_per_s"), where + ".bytes_per_s"),
                      number(required(pair, where, "latency_s"), where + ".latency_s")};
  }

  double number(const YAML::Node& node, const std::string& field) const {
    double value = 0;
    const std::string s = node.IsScalar() ? node.Scalar() : std::string();
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !(value >= 0)) {
      fail(node, field, "expected a number of at least 0, got " + describe(node));
    }
    return value;
  }
};

}  // namespace

LinkMeasurement read_links(const YAML::Node& links, const std::string& source) {
  return LinksReader(source).read(links);
}

}  // namespace ddl::comm::topology
