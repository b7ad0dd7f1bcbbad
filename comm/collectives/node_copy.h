#pragma once
// Copies for the node group's output (node.cc): plain, or with streaming stores.

#include <cstddef>

namespace ddl::comm::node {

/// Copies `bytes` from `src` to `dst` (not overlapping) with non-temporal stores where the CPU
/// has them (x86-64's movntdq, SSE2: every x86-64 CPU), else memcpy. For output that is not
/// read again soon: its lines go to memory without first being read for ownership and without
/// evicting the data still in use (the slots). Their order against later stores is only fixed
/// by stream_fence().
void stream_copy(void* dst, const void* src, size_t bytes);

/// Orders every earlier streaming store before any later store (sfence; nothing elsewhere).
void stream_fence();

/// stream_copy when `stream`, else memcpy.
void copy_out(void* dst, const void* src, size_t bytes, bool stream);

}  // namespace ddl::comm::node
