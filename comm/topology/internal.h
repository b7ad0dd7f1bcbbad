#pragma once

// What the files of comm/topology/ share: quoting, integers, the version line and the line walk
// both readers start with. Internal to libddl's topology code; other folders include
// comm/topology.h.

#include <charconv>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/text.h"
#include "comm/topology.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace ddl::comm::topology {

/// `s` in single quotes, for messages.
inline std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

/// Parses a whole decimal integer (optional '-'); false on anything else or out of range.
inline bool parse_int(std::string_view s, int& value) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc() && end == s.data() + s.size();
}

/// `s` without leading and trailing spaces and tabs.
inline std::string_view trim(std::string_view s) {
  return base::trim(s, base::kBlanks);
}

/// A topology file's "version: <major>.<minor>".
struct FormatVersion {
  int major = 0;
  int minor = 0;
};

/// "1.0" as {1, 0}; nullopt unless it is two non-negative integers joined by a dot.
std::optional<FormatVersion> parse_version(std::string_view text);

/// Throws TopologyError naming `source` unless `v` is this libddl's major format version.
void check_major(const FormatVersion& v, const std::string& source);

/// Reads "version: ..." in any quoting and throws when it names another major version; does
/// nothing on any other line.
void sniff_version(std::string_view line, const std::string& source);

/// The `links:` of a 1.1 file (its node, read with yaml-cpp by either reader). Throws
/// TopologyError "SOURCE:LINE:COLUMN: links.FIELD: problem".
LinkMeasurement read_links(const YAML::Node& links, const std::string& source);

/// Takes the next piece of a topology file's text; false to stop writing (an error).
using TextSink = std::function<bool(std::string_view)>;

/// The text format_topology returns, handed to `sink` in pieces of about `chunk` bytes (whole
/// lines). False when the sink said no.
bool write_topology_text(const Topology& t, const TextSink& sink, size_t chunk);

/// validate(t), its message prefixed with `source`.
void validate_read(const Topology& t, const std::string& source);

/// The lines of a text that are neither blank nor a full-line comment, one at a time.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}

  // The next line that is not blank or a full-line comment; false at the end of the text.
  bool next(std::string_view& line) {
    while (pos_ < text_.size()) {
      const size_t nl = text_.find('\n', pos_);
      const size_t end = nl == std::string_view::npos ? text_.size() : nl;
      line = text_.substr(pos_, end - pos_);
      pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
      const size_t first = line.find_first_not_of(' ');
      if (first != std::string_view::npos && line[first] != '#') return true;
    }
    return false;
  }

  // Like next() but leaves the line to be read again.
  bool peek(std::string_view& line) {
    const size_t saved = pos_;
    const bool found = next(line);
    pos_ = saved;
    return found;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace ddl::comm::topology
