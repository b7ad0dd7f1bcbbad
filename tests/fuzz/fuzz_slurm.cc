// libFuzzer target for the Slurm parsers: the input up to the first '\n' is $SLURM_JOB_NODELIST,
// the rest $SLURM_TASKS_PER_NODE (empty when there is no '\n'). Only InputError may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hostfiles/host_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t newline = text.find('\n');
  const std::string_view nodelist = text.substr(0, newline);
  const std::string_view tasks =
      newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  try {
    (void)ddl::hostfiles::parse_slurm_tasks_per_node(tasks);
  } catch (const ddl::hostfiles::InputError&) {
  }
  try {
    (void)ddl::hostfiles::parse_slurm(nodelist, tasks);
  } catch (const ddl::hostfiles::InputError&) {
  }
  return 0;
}
