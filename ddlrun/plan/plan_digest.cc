// How it works: the topology file format_topology writes has one block per top-level key (a
// line that starts in column 0, and the indented lines after it); each block is hashed on its
// own, so that two nodes' digests differ exactly in the blocks whose text differs.

#include "ddlrun/plan/plan_digest.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "comm/comm.h"
#include "ddlrun/plan/plan.h"

namespace ddl::ddlrun {

namespace {

std::string fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

/// "key=value" words of a digest, in order; none when it is not one (the digest comes from
/// another node: only up to 16 keys of up to 16 letters and '_' pass into a message).
std::vector<std::pair<std::string, std::string>> parts(const std::string& digest) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(digest);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq > 16 || out.size() == 16 ||
        word.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") < eq) {
      return {};
    }
    out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return out;
}

}  // namespace

std::string plan_digest(const JobPlan& plan) {
  std::vector<std::pair<std::string, std::string>> blocks;
  std::istringstream in(comm::format_topology(plan.topology));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ' && line[0] != '-') {
      blocks.emplace_back(line.substr(0, line.find(':')), std::string());
    }
    if (!blocks.empty()) blocks.back().second += line + '\n';
  }
  std::string program;
  for (const std::string& w : plan.program)
    program += w + '\0';
  blocks.emplace_back("program", program);
  std::string digest;
  for (const auto& [key, text] : blocks)
    digest += (digest.empty() ? "" : " ") + key + "=" + fnv1a(text);
  return digest;
}

std::string digest_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  const auto pa = parts(a), pb = parts(b);
  if (pa.empty() || pb.empty()) return "everything";
  std::map<std::string, std::string> other(pb.begin(), pb.end());
  std::vector<std::string> differ;
  for (const auto& [key, value] : pa) {
    const auto it = other.find(key);
    if (it == other.end() || it->second != value) differ.push_back(key);
    if (it != other.end()) other.erase(it);
  }
  for (const auto& [key, value] : other)
    differ.push_back(key);
  std::string text;
  for (size_t i = 0; i < differ.size(); ++i)
    text += (i == 0 ? "" : i + 1 == differ.size() ? " and " : ", ") + differ[i];
  return text;
}

}  // namespace ddl::ddlrun
