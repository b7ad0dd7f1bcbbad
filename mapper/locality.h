#pragma once

#include <optional>
#include <vector>

#include "mapper/inventory.h"

namespace ddl::mapper {

// Private to mapper/: where devices and CPUs sit in an inventory, as the placement steps
// (map, bind, nic, rings) ask it.

/// The package (OS index) a device or NUMA node belongs to, when known: its own, else its
/// NUMA node's.
std::optional<int> package_of(const Inventory& inventory, const Locality& where);

/// The package holding hardware thread `pu` (OS index), when any does.
std::optional<int> package_of_pu(const Inventory& inventory, int pu);

/// The package with this OS index, or null.
const Package* find_package(const Inventory& inventory, int os_index);

/// The cores of one package, or of the whole host, in topology order.
std::vector<const Core*> cores_of(const Package& package);
std::vector<const Core*> all_cores(const Inventory& inventory);

}  // namespace ddl::mapper
