#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"

namespace ddl::ddlrun {

/// A small document tree that prints as YAML or JSON with the same content and key order.
struct Value {
  using List = std::vector<Value>;
  using Map = std::vector<std::pair<std::string, Value>>;
  /// A list made while it is written, one item at a time: a million ranks' entries are never
  /// held at once. Printed as a List of item(0), ..., item(count - 1).
  struct Generated {
    size_t count = 0;
    std::function<Value(size_t)> item;
  };
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, List, Map, Generated> v;

  Value() : v(nullptr) {}
  Value(bool b) : v(b) {}
  Value(int i) : v(int64_t{i}) {}
  Value(int64_t i) : v(i) {}
  Value(double d) : v(d) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(List l) : v(std::move(l)) {}
  Value(Map m) : v(std::move(m)) {}
  Value(Generated g) : v(std::move(g)) {}
};

/// JSON text, indented by two spaces, ending with a newline.
std::string to_json(const Value& value);
/// YAML text (block style), ending with a newline.
std::string to_yaml(const Value& value);

/// Rows as columns two spaces apart, each as wide as its longest entry; the last not padded;
/// every line indented by two spaces.
void table(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

/// The plan as a document: ddlrun version, hosts (name, slots, max_slots, ranks, kind,
/// origin), ranks, mode, launcher and reason, program, exports, mpiargs and settings.
Value plan_document(const JobPlan& plan, const Options& options);

/// The dry run's output in the chosen format.
std::string render_plan(const JobPlan& plan, const Options& options);

/// The same, written to `out` as hostfiles::printable shows it, a piece at a time (whole
/// lines): the JSON or YAML of a million ranks is never held whole.
void write_plan(std::ostream& out, const JobPlan& plan, const Options& options);

}  // namespace ddl::ddlrun
