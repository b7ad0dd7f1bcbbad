// parse_topology_fast: the reader of the layout format_topology writes.
//
// How it works: YAML is slow to read through a generic node tree (yaml-cpp needs seconds and
// hundreds of MiB for the 27,648 ranks of Summit), yet every rank reads the whole file at start.
// So the reader first tries the exact layout format_topology writes: the keys in their order, one
// flow mapping per host and per rank, one flow sequence per ring, double-quoted strings without
// escapes, decimal integers. It walks the text once, line by line, with a cursor that matches
// literal key text and reads values in place. Full-line comments and blank lines are skipped.
// At the first thing it does not expect (another layout, another key order, an escape, an unknown
// field from a newer minor version, a malformed value) it gives up and returns nothing, and the
// text goes to the yaml-cpp reader, which accepts any YAML spelling and words the errors. It also
// gives up on texts that only look like its layout: a key with no entries under it ("hosts:"
// alone is null to YAML, not an empty list) and a NUL byte anywhere (which the yaml-cpp reader
// refuses), so that whatever it takes, both readers read alike. Before
// anything else, both readers look at the first line: one naming another major version (in any
// quoting) is refused at once, since such a file may not even be YAML this reader understands.

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "comm/topology.h"
#include "comm/topology/internal.h"

namespace ddl::comm {

using topology::Lines;
using topology::parse_version;
using topology::sniff_version;
using topology::validate_read;

namespace {

class Cursor {
 public:
  explicit Cursor(std::string_view line) : s_(line) {}

  bool lit(std::string_view text) {
    if (s_.substr(pos_, text.size()) != text) return false;
    pos_ += text.size();
    return true;
  }

  bool integer(int& value) {
    const char* begin = s_.data() + pos_;
    const char* end = s_.data() + s_.size();
    if (begin == end || (*begin != '-' && (*begin < '0' || *begin > '9'))) return false;
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc()) return false;
    pos_ += static_cast<size_t>(stop - begin);
    return true;
  }

  // A double-quoted string without escapes, control characters or non-ASCII bytes.
  bool quoted(std::string& value) {
    if (!lit("\"")) return false;
    const size_t start = pos_;
    while (pos_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        value.assign(s_.substr(start, pos_ - start));
        ++pos_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x7f) return false;
      ++pos_;
    }
    return false;
  }

  bool at_end() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

bool quoted_field(std::string_view line, std::string_view key, std::string& value) {
  Cursor c(line);
  return c.lit(key) && c.quoted(value) && c.at_end();
}

bool fast_host(std::string_view line, Host& h) {
  Cursor c(line);
  if (!(c.lit("  - {index: ") && c.integer(h.index) && c.lit(", name: ") && c.quoted(h.name) &&
        c.lit(", address: ") && c.quoted(h.address) && c.lit(", nics: ["))) {
    return false;
  }
  if (!c.lit("]")) {
    do {
      Nic& n = h.nics.emplace_back();
      if (!(c.lit("{name: ") && c.quoted(n.name) && c.lit(", kind: ") && c.quoted(n.kind) &&
            c.lit(", address: ") && c.quoted(n.address) && c.lit("}"))) {
        return false;
      }
    } while (c.lit(", "));
    if (!c.lit("]")) return false;
  }
  return c.lit("}") && c.at_end();
}

bool fast_rank(std::string_view line, RankPlacement& r, std::string& scratch) {
  Cursor c(line);
  if (!(c.lit("  - {rank: ") && c.integer(r.rank) && c.lit(", local_rank: ") &&
        c.integer(r.local_rank) && c.lit(", host: ") && c.integer(r.host) && c.lit(", gpu: ") &&
        c.integer(r.gpu) && c.lit(", gpu_bus_id: ") && c.quoted(r.gpu_bus_id) &&
        c.lit(", gpu_uuid: ") && c.quoted(r.gpu_uuid) && c.lit(", cpus: ") && c.quoted(scratch) &&
        c.lit(", nic: ") && c.quoted(r.nic) && c.lit(", address: ") && c.quoted(r.address) &&
        c.lit("}") && c.at_end())) {
    return false;
  }
  if (scratch.empty()) return true;
  try {
    r.cpus = CpuSet::parse(scratch);
  } catch (const TopologyError&) {
    return false;
  }
  return true;
}

bool fast_ring(std::string_view line, Ring& ring) {
  Cursor c(line);
  if (!c.lit("      - [")) return false;
  do {
    int member = 0;
    if (!c.integer(member)) return false;
    ring.push_back(member);
  } while (c.lit(", "));
  return c.lit("]") && c.at_end();
}

/// Reads `rest`, the text from "links:" to the end, into t.links; false when it is not one
/// valid `links:` section (the yaml-cpp reader then reads the whole file and words the error).
bool fast_links(std::string_view rest, const std::string& source, Topology& t) {
  try {
    const YAML::Node doc = YAML::Load(std::string(rest));
    if (!doc.IsMap() || doc.size() != 1) return false;
    t.links = topology::read_links(doc["links"], source);
    return true;
  } catch (const YAML::Exception&) {
    return false;
  } catch (const TopologyError&) {
    return false;
  }
}

/// The ring orders after "ring_orders:", then the links of format 1.1 when the text goes on
/// with "links:"; false at anything else.
bool fast_rings_and_links(Lines& lines, std::string_view text, const std::string& source,
                          Topology& t) {
  std::string_view line;
  while (lines.next(line)) {
    if (line == "links:") {  // format 1.1: the rest of the text, a few lines per host pair
      return fast_links(text.substr(static_cast<size_t>(line.data() - text.data())), source, t);
    }
    Cursor c(line);
    int dimension = 0;
    if (!(c.lit("  - dimension: ") && c.integer(dimension) && c.at_end()) ||
        dimension != static_cast<int>(t.rings.size())) {
      return false;
    }
    if (!lines.next(line) || line != "    rings:") return false;
    auto& rings = t.rings.emplace_back();
    while (lines.peek(line) && line.starts_with("      - ")) {
      lines.next(line);
      if (!fast_ring(line, rings.emplace_back())) return false;
    }
    if (rings.empty()) return false;
  }
  return true;
}

std::optional<Topology> parse_fast(std::string_view text, const std::string& source) {
  Lines lines(text);
  std::string_view line;
  if (!lines.next(line)) return std::nullopt;
  sniff_version(line, source);
  // The yaml-cpp reader refuses a NUL byte wherever it is.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;

  std::string scratch;
  if (!quoted_field(line, "version: ", scratch)) return std::nullopt;
  const auto version = parse_version(scratch);
  if (!version) return std::nullopt;

  Topology t;
  if (!lines.next(line) || !quoted_field(line, "job_id: ", t.job_id)) return std::nullopt;
  if (!lines.next(line) || !quoted_field(line, "mode: ", scratch)) return std::nullopt;
  try {
    t.mode = parse_mode(scratch);
  } catch (const ModeError&) {
    return std::nullopt;
  }

  if (!lines.next(line) || line != "hosts:") return std::nullopt;
  while (lines.peek(line) && line.starts_with("  - ")) {
    lines.next(line);
    if (!fast_host(line, t.hosts.emplace_back())) return std::nullopt;
  }
  // A key with no entries below it is null to YAML, not an empty list.
  if (t.hosts.empty()) return std::nullopt;

  if (!lines.next(line) || line != "ranks:") return std::nullopt;
  while (lines.peek(line) && line.starts_with("  - ")) {
    lines.next(line);
    if (!fast_rank(line, t.ranks.emplace_back(), scratch)) return std::nullopt;
  }
  if (t.ranks.empty()) return std::nullopt;

  if (!lines.next(line) || line != "ring_orders:" ||
      !fast_rings_and_links(lines, text, source, t)) {
    return std::nullopt;
  }
  if (t.rings.empty()) return std::nullopt;
  return t;
}

}  // namespace

std::optional<Topology> parse_topology_fast(std::string_view text, const std::string& source) {
  std::optional<Topology> t = parse_fast(text, source);
  if (t) validate_read(*t, source);
  return t;
}

}  // namespace ddl::comm
