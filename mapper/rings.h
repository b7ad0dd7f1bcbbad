#pragma once

#include <map>
#include <utility>
#include <vector>

#include "mapper/inventory.h"

namespace ddl::mapper {

// Private to mapper/: the ring-order step of place(). hardware_ring_order(),
// socket_ring_size() and make_topology() (place.h) are implemented in rings.cc too.

/// Ring orders of the hosts' ranks, each computed once per inventory and GPU list: hosts alike
/// (thousands of one node type) share the search.
class RingOrders {
 public:
  /// The hardware ring order of the ranks of one host by local rank, their GPUs `gpus` (-1:
  /// none) on `inventory` (null: unknown): hardware_ring_order() when they have GPUs, else
  /// 0, 1, ...
  std::vector<int> of(const Inventory* inventory, const std::vector<int>& gpus);

 private:
  std::map<std::pair<const Inventory*, std::vector<int>>, std::vector<int>> cache_;
};

}  // namespace ddl::mapper
