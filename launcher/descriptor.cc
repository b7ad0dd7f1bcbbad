// Resolving --launcher through a table of backends (see descriptor.h).

#include "launcher/descriptor.h"

#include <algorithm>
#include <vector>

#include "base/check.h"

namespace ddl::launcher {

std::unique_ptr<Backend> BackendDescriptor::make(const Job& job,
                                                 const LaunchOptions& options) const {
  if (make_backend != nullptr) return make_backend(job, options);
  DDL_CHECK(make_launcher != nullptr, "the launcher '" + std::string(name) + "' starts nothing");
  return make_external_backend(*make_launcher(options), job, options);
}

std::string BackendDescriptor::setting(
    const std::map<std::string, std::string, std::less<>>& settings, std::string_view name) const {
  const auto option = std::find_if(options.begin(), options.end(),
                                   [name](const BackendOption& o) { return o.name == name; });
  DDL_CHECK(option != options.end(),
            "the " + std::string(this->name) + " launcher has no option " + std::string(name));
  const auto it = settings.find(name);
  return it == settings.end() ? std::string(option->default_value) : it->second;
}

ExternalCommand BackendDescriptor::preview(const Job& job, const LaunchOptions& options) const {
  DDL_CHECK(make_launcher != nullptr,
            "the " + std::string(name) + " launcher runs no other program to preview");
  return preview_external(*make_launcher(options), job, options);
}

const BackendDescriptor* find_backend(BackendTable table, std::string_view name) {
  for (const BackendDescriptor* b : table)
    if (b->name == name) return b;
  return nullptr;
}

namespace {

/// The first row `picker` picks from whose rule holds in `s`, by rising auto_rank.
const BackendDescriptor& pick(BackendTable table, const BackendDescriptor& picker,
                              const Situation& s) {
  std::vector<const BackendDescriptor*> rows;
  for (const BackendDescriptor* b : table) {
    if (b->automatic == nullptr) continue;
    if (picker.picks == BackendDescriptor::Picks::kPmixServers && !b->serves_pmix) continue;
    rows.push_back(b);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](auto* a, auto* b) { return a->auto_rank < b->auto_rank; });
  for (const BackendDescriptor* b : rows)
    if (b->automatic(s)) return *b;
  DDL_FAIL("--launcher " + std::string(picker.name) + " found no backend whose rule holds");
}

}  // namespace

Choice choose(BackendTable table, std::string_view requested, const Situation& s) {
  const BackendDescriptor* asked = find_backend(table, requested);
  DDL_CHECK(asked != nullptr, "no launcher is called '" + std::string(requested) + "'");
  switch (asked->picks) {
    case BackendDescriptor::Picks::kNothing:
      return {asked, "asked for with --launcher " + std::string(requested)};
    case BackendDescriptor::Picks::kAnyRule: {
      const BackendDescriptor& b = pick(table, *asked, s);
      return {&b, std::string(b.why_auto.empty() ? b.why : b.why_auto)};
    }
    case BackendDescriptor::Picks::kPmixServers: {
      const BackendDescriptor& b = pick(table, *asked, s);
      return {&b, "asked for with --launcher " + std::string(requested) +
                      ": ddlrun's own launcher with its PMIx server (" + std::string(b.name) +
                      ": " + std::string(b.why) + ")"};
    }
  }
  DDL_FAIL("a launcher row picks in an unknown way");
}

}  // namespace ddl::launcher
