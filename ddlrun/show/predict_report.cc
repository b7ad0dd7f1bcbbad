#include "ddlrun/show/predict_report.h"

#include <cmath>
#include <sstream>

namespace ddl::ddlrun {

namespace {

using mapper::bandwidth_text;
using mapper::duration_text;

/// "1 MiB", "64 MiB", "1.5 GiB", "4096 B".
std::string size_text(double bytes) {
  static constexpr std::pair<double, const char*> kUnits[] = {
      {1099511627776.0, "TiB"}, {1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}};
  for (const auto& [scale, name] : kUnits) {
    if (bytes >= scale && std::fmod(bytes, scale / 64) == 0) {
      std::ostringstream s;
      s << bytes / scale << " " << name;
      return s.str();
    }
  }
  return std::to_string(static_cast<long long>(bytes)) + " B";
}

std::string label(const comm::Mode& mode) {
  return mode.algorithm == comm::Algorithm::kRing ? "flat ring" : "";
}

const mapper::ModePrediction* find(const mapper::Prediction& p, const comm::Mode& mode) {
  for (const mapper::ModePrediction& m : p.modes) {
    if (m.mode == mode) return &m;
  }
  return nullptr;
}

}  // namespace

std::pair<std::string, std::string> prediction_verdict(const JobPlan& plan) {
  const mapper::Prediction& p = plan.prediction;
  const mapper::ModePrediction& fastest = p.modes[p.fastest];
  const std::string at = " for " + size_text(p.pick_bytes) + " (--predict-bytes)";
  if (plan.mode_auto) {
    std::string s = plan.mode.str() + ", the fastest predicted" + at + ": " +
                    duration_text(fastest.seconds_at_pick);
    const mapper::ModePrediction& first = p.modes.front();
    if (&first != &fastest) {
      s += ", against " + duration_text(first.seconds_at_pick) + " for " + first.mode.str();
    }
    return {"picked", s};
  }
  const mapper::ModePrediction* mine = find(p, plan.mode);
  std::string s = plan.mode.str() + " (--mode auto would pick by prediction)";
  if (mine != nullptr && mine != &fastest) {
    s += "; the fastest predicted" + at + " is " + fastest.mode.str() + ": " +
         duration_text(fastest.seconds_at_pick) + ", against " +
         duration_text(mine->seconds_at_pick);
  }
  return {"named", s};
}

void prediction_text(std::ostream& out, const JobPlan& plan) {
  const mapper::Prediction& p = plan.prediction;
  if (p.modes.empty() || plan.placement.ranks < 2) return;
  out << "prediction: allreduce time and busbw by the cost model (ddlrun(1), COST MODEL)\n";
  std::vector<std::vector<std::string>> levels = {{"LEVEL", "BANDWIDTH", "LATENCY", "FROM"}};
  for (const mapper::FabricLevel& l : p.fabric.levels)
    levels.push_back({l.name, bandwidth_text(l.bytes_per_s), duration_text(l.latency_s), l.from});
  table(out, levels);
  std::vector<std::vector<std::string>> rows = {{"  MODE"}};
  for (double s : p.sizes)
    rows[0].push_back(size_text(s));
  const int ranks = plan.placement.ranks;
  for (const mapper::ModePrediction& m : p.modes) {
    rows.push_back({(m.mode == plan.mode ? "* " : "  ") + m.mode.str()});
    for (double t : m.seconds) {
      const double bytes = p.sizes[rows.back().size() - 1];
      rows.back().push_back(duration_text(t) + " " +
                            bandwidth_text(mapper::bus_bandwidth(bytes, ranks, t)));
    }
    rows.back().push_back(label(m.mode));
  }
  table(out, rows);
  const auto [why, text] = prediction_verdict(plan);
  out << why << ":" << std::string(10 - why.size(), ' ') << text << "\n";
}

std::vector<std::pair<std::string, std::string>> prediction_legend(const JobPlan& plan) {
  const mapper::Prediction& p = plan.prediction;
  const mapper::ModePrediction* mine = find(p, plan.mode);
  if (mine == nullptr || plan.placement.ranks < 2) return {};
  std::vector<std::pair<std::string, std::string>> lines;
  for (size_t i = 0; i < p.sizes.size() && i < mine->seconds.size(); ++i) {
    const double t = mine->seconds[i];
    lines.emplace_back(
        "predicted " + size_text(p.sizes[i]),
        duration_text(t) + ", " +
            bandwidth_text(mapper::bus_bandwidth(p.sizes[i], plan.placement.ranks, t)) + " busbw");
  }
  lines.push_back(prediction_verdict(plan));
  return lines;
}

Value prediction_document(const JobPlan& plan) {
  const mapper::Prediction& p = plan.prediction;
  if (p.modes.empty() || plan.placement.ranks < 2) return Value();
  Value::List fabric, sizes, modes;
  for (const mapper::FabricLevel& l : p.fabric.levels) {
    fabric.emplace_back(Value::Map{{"level", l.name},
                                   {"bytes_per_s", l.bytes_per_s},
                                   {"latency_s", l.latency_s},
                                   {"from", l.from}});
  }
  for (double s : p.sizes)
    sizes.emplace_back(static_cast<int64_t>(s));
  for (const mapper::ModePrediction& m : p.modes) {
    Value::List seconds, busbw;
    for (size_t i = 0; i < m.seconds.size(); ++i) {
      seconds.emplace_back(m.seconds[i]);
      busbw.emplace_back(mapper::bus_bandwidth(p.sizes[i], plan.placement.ranks, m.seconds[i]));
    }
    modes.emplace_back(Value::Map{{"mode", m.mode.str()},
                                  {"flat_ring", m.mode.algorithm == comm::Algorithm::kRing},
                                  {"chosen", m.mode == plan.mode},
                                  {"seconds", std::move(seconds)},
                                  {"busbw_bytes_per_s", std::move(busbw)},
                                  {"seconds_at_predict_bytes", m.seconds_at_pick},
                                  {"bound_seconds_at_predict_bytes", m.bound_at_pick}});
  }
  return Value::Map{{"fabric", std::move(fabric)},
                    {"sizes", std::move(sizes)},
                    {"predict_bytes", static_cast<int64_t>(p.pick_bytes)},
                    {"modes", std::move(modes)},
                    {"fastest", p.modes[p.fastest].mode.str()},
                    {"picked", plan.mode_auto}};
}

}  // namespace ddl::ddlrun
