// The version line: both readers refuse a file of another major format version at once.

#include "comm/topology/internal.h"

namespace ddl::comm::topology {

std::optional<FormatVersion> parse_version(std::string_view text) {
  const size_t dot = text.find('.');
  FormatVersion v;
  if (dot == std::string_view::npos || !parse_int(text.substr(0, dot), v.major) ||
      !parse_int(text.substr(dot + 1), v.minor) || v.major < 0 || v.minor < 0) {
    return std::nullopt;
  }
  return v;
}

void check_major(const FormatVersion& v, const std::string& source) {
  if (v.major == kTopologyFormatMajor) return;
  throw TopologyError(source + " was written by " +
                      (v.major > kTopologyFormatMajor ? "a newer" : "an older") +
                      " ddlrun (format " + std::to_string(v.major) + "." + std::to_string(v.minor) +
                      "); this libddl reads format " + std::to_string(kTopologyFormatMajor) +
                      ".x: use the same ddlrun and libddl");
}

void sniff_version(std::string_view line, const std::string& source) {
  if (!line.starts_with("version:")) return;
  std::string_view value = trim(line.substr(8));
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  if (const auto v = parse_version(value)) check_major(*v, source);
}

}  // namespace ddl::comm::topology
