// parse_topology_generic: the yaml-cpp reader, for any YAML spelling; errors name the file, line,
// column and field.

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "base/text.h"
#include "base/yaml.h"
#include "comm/topology.h"
#include "comm/topology/internal.h"
#include "comm/topology/yaml_fields.h"

namespace ddl::comm {

using topology::check_major;
using topology::Lines;
using topology::parse_int;
using topology::parse_version;
using topology::quote;
using topology::sniff_version;
using topology::validate_read;

namespace {

/// How deep a topology file's YAML may nest; ddlrun's own files go 5 levels deep (a ring's
/// members in a dimension's rings).
constexpr size_t kMaxDepth = 16;

/// Refuses, before the document is built, what ddlrun never writes and yaml-cpp would take
/// without a word: aliases (every use of one repeats its anchor's whole subtree, so that a file
/// of a few hundred KB could stand for billions of ring entries), tags (`!!binary` would hand
/// its base64 text on as a value), a key given twice in one mapping (yaml-cpp keeps both and
/// answers with the first) and nesting deeper than kMaxDepth (which yaml-cpp reports only as
/// "bad file"). The events are read once, without building anything.
///
/// How it works: a stack holds one frame per open sequence or mapping. In a mapping, nodes
/// alternate between key and value; each key that is a scalar is looked up in the frame's keys.
class EventChecks : public YAML::EventHandler {
 public:
  explicit EventChecks(const std::string& source) : source_(source) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, "", nullptr); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    fail(mark,
         "a YAML alias (*name): topology files hold none (each use of an alias repeats a whole "
         "subtree); write the entries out, as ddlrun does");
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    node(mark, tag, &value);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, false);
  }
  void OnSequenceEnd() override { frames_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, true);
  }
  void OnMapEnd() override { frames_.pop_back(); }

  /// Reads the first document of `text`, the one YAML::Load builds; throws TopologyError at
  /// the first thing refused. (Not a loop over the documents: on some malformed streams
  /// yaml-cpp 0.7's HandleNextDocument returns true forever without consuming input;
  /// fuzz_topology found one.)
  void check(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    parser.HandleNextDocument(*this);
  }

 private:
  struct Frame {
    bool map = false;
    bool key_next = true;
    std::map<std::string, YAML::Mark> keys;
  };

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& problem) const {
    throw TopologyError(base::yaml_position(source_, mark) + ": " + problem);
  }

  void check_tag(const YAML::Mark& mark, const std::string& tag) const {
    if (tag.empty() || tag == "?" || tag == "!") return;
    fail(mark, "a YAML tag (" + topology::quote(tag) +
                   "): topology files hold none; write plain values, as ddlrun does");
  }

  /// A node at `mark`: a key or a value when the innermost open node is a mapping.
  void node(const YAML::Mark& mark, const std::string& tag, const std::string* scalar) {
    check_tag(mark, tag);
    if (frames_.empty() || !frames_.back().map) return;
    Frame& frame = frames_.back();
    frame.key_next = !frame.key_next;
    if (frame.key_next || scalar == nullptr) return;  // a value, or a key that is no scalar
    const auto [first, added] = frame.keys.emplace(*scalar, mark);
    if (added) return;
    fail(mark, "the key " + topology::quote(*scalar) + " again (first at line " +
                   std::to_string(first->second.line + 1) + "): give each field once");
  }

  void open(const YAML::Mark& mark, const std::string& tag, bool map) {
    node(mark, tag, nullptr);
    if (frames_.size() == kMaxDepth) {
      fail(mark, "YAML nested more than " + std::to_string(kMaxDepth) +
                     " levels deep; a topology file nests 5: is this the topology file ddlrun "
                     "wrote?");
    }
    frames_.push_back(Frame{map, true, {}});
  }

  const std::string& source_;
  std::vector<Frame> frames_;
};

/// Refuses a NUL byte anywhere in `text`: topology files are text, and yaml-cpp would read one
/// as the end of a value or take the file for UTF-16.
void refuse_nul(std::string_view text, const std::string& source) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  const std::string_view before = text.substr(0, nul);
  const size_t line_start = before.rfind('\n');
  const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
  const size_t column = line_start == std::string_view::npos ? nul + 1 : nul - line_start;
  throw TopologyError(source + ":" + std::to_string(line) + ":" + std::to_string(column) +
                      ": a NUL byte; a topology file is text: is this the topology file ddlrun "
                      "wrote?");
}

class GenericReader : topology::YamlFields {
 public:
  using YamlFields::YamlFields;

  Topology read(std::string_view text) {
    // A file of another major version may not even be YAML that this reader understands.
    std::string_view first_line;
    if (Lines(text).next(first_line)) sniff_version(first_line, source_);
    refuse_nul(text, source_);
    YAML::Node root;
    try {
      const std::string copy(text);
      EventChecks(source_).check(copy);
      root = YAML::Load(copy);
    } catch (const YAML::Exception& e) {
      throw TopologyError(at(e.mark) + "not valid YAML: " + e.msg);
    }
    if (!root.IsMap()) {
      throw TopologyError(at(root.Mark()) + "expected a mapping with the keys version, job_id, " +
                          "mode, hosts, ranks and ring_orders, got " + describe(root) +
                          "; is this a ddlrun topology file?");
    }
    const YAML::Node version_node = root["version"];
    if (!version_node) {
      throw TopologyError(at(root.Mark()) + "version: missing; is this a ddlrun topology file?");
    }
    const std::string version_text = string(version_node, "version");
    const auto version = parse_version(version_text);
    if (!version) {
      fail(version_node, "version",
           "expected \"<major>.<minor>\" such as \"1.0\", got " + quote(version_text));
    }
    check_major(*version, source_);
    strict_ = version->minor <= kTopologyFormatMinor;

    check_keys(root, "", {"version", "job_id", "mode", "hosts", "ranks", "ring_orders", "links"});
    Topology t;
    t.job_id = string(required(root, "", "job_id"), "job_id");
    const YAML::Node mode_node = required(root, "", "mode");
    try {
      t.mode = parse_mode(string(mode_node, "mode"));
    } catch (const ModeError& e) {
      fail(mode_node, "mode", e.what());
    }
    size_t i = 0;
    for (const YAML::Node& node : sequence(required(root, "", "hosts"), "hosts"))
      t.hosts.push_back(host(node, "hosts[" + std::to_string(i++) + "]"));
    i = 0;
    for (const YAML::Node& node : sequence(required(root, "", "ranks"), "ranks"))
      t.ranks.push_back(rank(node, "ranks[" + std::to_string(i++) + "]"));
    for (const YAML::Node& node : sequence(required(root, "", "ring_orders"), "ring_orders"))
      t.rings.push_back(dimension(node, t.rings.size()));
    if (const YAML::Node links = root["links"]) t.links = topology::read_links(links, source_);
    return t;
  }

 private:
  void check_keys(const YAML::Node& map, const std::string& where,
                  std::initializer_list<std::string_view> known) const {
    for (const auto& entry : map) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
      if (std::find(known.begin(), known.end(), key) != known.end() || !strict_) continue;
      const std::string hint = base::did_you_mean(key, {known.begin(), known.size()});
      throw TopologyError(at(entry.first.Mark()) + (where.empty() ? "" : where + ": ") +
                          "unknown field " + quote(key) + hint);
    }
  }

  std::string optional_string(const YAML::Node& map, const std::string& where,
                              std::string_view key) const {
    const YAML::Node node = map[std::string(key)];
    return node ? string(node, join(where, key)) : std::string();
  }

  int required_int(const YAML::Node& map, const std::string& where, std::string_view key) const {
    return integer(required(map, where, key), join(where, key));
  }

  Host host(const YAML::Node& node, const std::string& where) const {
    mapping(node, where);
    check_keys(node, where, {"index", "name", "address", "nics"});
    Host h;
    h.index = required_int(node, where, "index");
    h.name = string(required(node, where, "name"), join(where, "name"));
    h.address = string(required(node, where, "address"), join(where, "address"));
    if (const YAML::Node nics = node["nics"]) {
      const std::string field = join(where, "nics");
      size_t i = 0;
      for (const YAML::Node& nic : sequence(nics, field)) {
        const std::string nic_where = field + "[" + std::to_string(i++) + "]";
        mapping(nic, nic_where);
        check_keys(nic, nic_where, {"name", "kind", "address"});
        Nic& n = h.nics.emplace_back();
        n.name = string(required(nic, nic_where, "name"), join(nic_where, "name"));
        n.kind = string(required(nic, nic_where, "kind"), join(nic_where, "kind"));
        n.address = optional_string(nic, nic_where, "address");
      }
    }
    return h;
  }

  RankPlacement rank(const YAML::Node& node, const std::string& where) const {
    mapping(node, where);
    check_keys(
        node, where,
        {"rank", "local_rank", "host", "gpu", "gpu_bus_id", "gpu_uuid", "cpus", "nic", "address"});
    RankPlacement r;
    r.rank = required_int(node, where, "rank");
    r.local_rank = required_int(node, where, "local_rank");
    r.host = required_int(node, where, "host");
    r.gpu = required_int(node, where, "gpu");
    r.gpu_bus_id = optional_string(node, where, "gpu_bus_id");
    r.gpu_uuid = optional_string(node, where, "gpu_uuid");
    const YAML::Node cpus = required(node, where, "cpus");
    try {
      r.cpus = CpuSet::parse(string(cpus, join(where, "cpus")));
    } catch (const TopologyError& e) {
      fail(cpus, join(where, "cpus"), e.what());
    }
    r.nic = optional_string(node, where, "nic");
    r.address = optional_string(node, where, "address");
    return r;
  }

  std::vector<Ring> dimension(const YAML::Node& node, size_t d) const {
    const std::string where = "ring_orders[" + std::to_string(d) + "]";
    mapping(node, where);
    check_keys(node, where, {"dimension", "rings"});
    const YAML::Node number = required(node, where, "dimension");
    if (integer(number, join(where, "dimension")) != static_cast<int>(d)) {
      fail(number, join(where, "dimension"),
           "expected " + std::to_string(d) + " (the dimensions come in order, innermost first), " +
               "got " + describe(number));
    }
    const std::string field = join(where, "rings");
    const YAML::Node rings = sequence(required(node, where, "rings"), field);
    std::vector<Ring> out;
    out.reserve(rings.size());
    for (const YAML::Node& members : rings) {
      const std::string ring_field = field + "[" + std::to_string(out.size()) + "]";
      sequence(members, ring_field);
      Ring& ring = out.emplace_back();
      ring.reserve(members.size());
      for (const YAML::Node& member : members)
        ring.push_back(integer(member, ring_field + "[" + std::to_string(ring.size()) + "]"));
    }
    return out;
  }

  bool strict_ = true;
};

}  // namespace

Topology parse_topology_generic(std::string_view text, const std::string& source) {
  Topology t = GenericReader(source).read(text);
  validate_read(t, source);
  return t;
}

}  // namespace ddl::comm
