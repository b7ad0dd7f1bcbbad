// libFuzzer target for inventory_from_yaml (what ddlrun-probe prints). Only InventoryError may
// escape, YAML syntax errors included; an inventory that parses must read back equal from
// to_yaml.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mapper/inventory.h"

namespace {

using ddl::mapper::Inventory;
using ddl::mapper::InventoryError;

[[noreturn]] void fail(const char* what, std::string_view input, const std::string& text) {
  std::fprintf(stderr, "fuzz_inventory: %s\n--- input ---\n%.*s\n--- written ---\n%s\n", what,
               static_cast<int>(input.size()), input.data(), text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Inventory inventory;
  try {
    inventory = ddl::mapper::inventory_from_yaml(input, "fuzz");
  } catch (const InventoryError&) {
    return 0;
  }
  const std::string text = ddl::mapper::to_yaml(inventory);
  Inventory again;
  try {
    again = ddl::mapper::inventory_from_yaml(text, "written");
  } catch (const InventoryError& e) {
    fail(e.what(), input, text);
  }
  if (!(again == inventory)) fail("written inventory parses differently", input, text);
  return 0;
}
