// The environment libddl reads (see settings.h).
//
// How it works. kSettings holds one row per variable: its name, how its value is read, the
// default libddl(3) states, the range a number is clamped into, a doc line and where the value
// goes in CommOptions. options_from_environment() walks the rows in order: a variable that is
// unset or empty keeps CommOptions' default; a number must be finite and at least 0 (else the
// error names the variable and its value) and is then clamped into the row's range; a switch is
// 0 or 1; an algorithm is a row of the allreduce registry (algorithms.h) or auto. DDL_OPTIONS
// comes before DDL_ALGO, so that DDL_ALGO overrides -mode's letter.

#include "comm/core/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

namespace ddl::comm {

namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
constexpr double kGiB = double(size_t{1} << 30);

size_t bytes(const SettingValue& v) {
  return static_cast<size_t>(v.number);
}

constexpr Setting kSettings[] = {
    {"DDL_TIMEOUT", SettingType::kNumber, "Default: 60", 0, kUnbounded,
     "seconds ddl_init() waits for the other ranks and a transfer may go without progress",
     [](CommOptions& o, const SettingValue& v) {
       o.timeout = std::chrono::milliseconds(static_cast<int64_t>(v.number * 1000));
     }},
    {"DDL_OPTIONS", SettingType::kMode, "", 0, 0,
     "IBM DDL's options: -mode's algorithm letter r selects the flat ring",
     [](CommOptions& o, const SettingValue& v) {
       if (mode_from_ddl_options(v.word).algorithm == Algorithm::kRing)
         o.algo = find_allreduce("ring");
     }},
    {"DDL_ALGO", SettingType::kAlgorithm, "Default: auto", 0, 0, "the allreduce algorithm",
     [](CommOptions& o, const SettingValue& v) { o.algo = find_allreduce(v.word); }},
    {"DDL_PIPELINE_BYTES", SettingType::kNumber, "Default: 1048576", 0, kUnbounded,
     "the multi-dimensional allreduce's chunks (0: not pipelined)",
     [](CommOptions& o, const SettingValue& v) { o.pipeline_bytes = bytes(v); }},
    {"DDL_MAX_RING", SettingType::kNumber, "default 16", 0, double{INT32_MAX},
     "the longest ring the multi-dimensional allreduce runs whole (0: never split)",
     [](CommOptions& o, const SettingValue& v) { o.max_ring = static_cast<int>(v.number); }},
    {"DDL_SHM", SettingType::kSwitch, "Default: 1", 0, 1,
     "0 turns the direct shared-memory collectives off",
     [](CommOptions& o, const SettingValue& v) { o.shm = v.number == 1; }},
    {"DDL_SHM_CHUNK_BYTES", SettingType::kNumber, "Default: the size of one core's level-2 cache",
     4096, kGiB, "each rank's shared-memory slots",
     [](CommOptions& o, const SettingValue& v) { o.shm_chunk_bytes = bytes(v); }},
    {"DDL_SHM_CMA_BYTES", SettingType::kNumber, "Default: 0", 0, kUnbounded,
     "allreduces from this size read the peers' buffers by cross-memory attach (0: never)",
     [](CommOptions& o, const SettingValue& v) { o.shm_cma_bytes = bytes(v); }},
    {"DDL_SHM_STREAM_BYTES", SettingType::kNumber,
     "Default: where the ranks' inputs and outputs together", 0, kUnbounded,
     "collectives from this size on one host write their output with streaming stores",
     [](CommOptions& o, const SettingValue& v) { o.shm_stream_bytes = bytes(v); }},
    {"DDL_SHM_SMALL_BYTES", SettingType::kNumber, "Default: 8192", 0, kGiB,
     "allreduces up to this size take one step of the direct shared-memory path",
     [](CommOptions& o, const SettingValue& v) { o.shm_small_bytes = bytes(v); }},
    {"DDL_SMALL_BYTES", SettingType::kNumber, "Default: 16384", 0, kUnbounded,
     "allreduces below this size use recursive doubling under auto",
     [](CommOptions& o, const SettingValue& v) { o.small_bytes = bytes(v); }},
    {"DDL_BUCKET_BYTES", SettingType::kNumber, "Default: 67108864", 1, kUnbounded,
     "the largest bucket of ddl_allreduce_n()",
     [](CommOptions& o, const SettingValue& v) { o.bucket_bytes = bytes(v); }},
    {"DDL_CHECK", SettingType::kNumber, "", 0, kUnbounded,
     "compare every allreduce with a reference, within this tolerance",
     [](CommOptions& o, const SettingValue& v) { o.check = v.number; }},
};

/// $name's value `v` as a number of at least 0; throws std::invalid_argument naming it.
double number(const Setting& s, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d >= 0) || !std::isfinite(d)) {
    throw std::invalid_argument("$" + std::string(s.name) + " is '" + v +
                                "'; expected a number of at least 0");
  }
  return std::clamp(d, s.low, s.high);
}

/// The value of `s` as set to `v`; throws std::invalid_argument naming it.
SettingValue read(const Setting& s, const std::string& v) {
  SettingValue value{0, v};
  switch (s.type) {
    case SettingType::kNumber:
      value.number = number(s, v);
      break;
    case SettingType::kSwitch:
      if (v != "0" && v != "1") {
        throw std::invalid_argument("$" + std::string(s.name) + " is '" + v + "'; expected 0 or 1");
      }
      value.number = v == "1" ? 1 : 0;
      break;
    case SettingType::kAlgorithm:
    case SettingType::kMode:
      break;
  }
  return value;
}

}  // namespace

std::span<const Setting> settings() {
  return kSettings;
}

CommOptions options_from_environment() {
  CommOptions o;
  for (const Setting& s : kSettings) {
    const char* v = std::getenv(std::string(s.name).c_str());
    if (v == nullptr || *v == '\0') continue;
    const std::string text = v;
    try {
      s.apply(o, read(s, text));
    } catch (const ModeError&) {
      // ddlrun checked the mode; a hand-written DDL_OPTIONS with a bad one is ignored here.
    }
  }
  return o;
}

}  // namespace ddl::comm
