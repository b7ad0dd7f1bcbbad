#include "process_group_ddl.h"

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "ddl/ddl.h"
#include "ddl/ddl.hpp"

namespace ddl::python {
namespace {

/// Whether libddl takes GPU buffers (built with its NCCL path: DDL_HAVE_NCCL in CMake).
#ifdef DDL_PG_WITH_NCCL
constexpr bool kWithNccl = true;
#else
constexpr bool kWithNccl = false;
#endif

/// Collectives that move data (not barrier, whose wait is other ranks' lateness, nor
/// point-to-point calls, which would wait for their peer) of at most this many bytes of CPU
/// tensors run on the calling thread when nothing is queued or running: no hand-off to the
/// worker and back, which costs two thread wake-ups per call (most of a small all_reduce's
/// time, bench/torch_call_cost.py). So their work is complete when returned, async_op=True or
/// not. Larger ones go to the worker and overlap with the caller's computation (DDP's buckets
/// with backward). $DDL_INLINE_BYTES sets the limit (0: never inline).
size_t inline_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("DDL_INLINE_BYTES");
    return v != nullptr && *v != '\0' ? static_cast<size_t>(std::strtoull(v, nullptr, 10))
                                      : size_t{64 * 1024};
  }();
  return bytes;
}

bool inlinable(c10d::OpType type, const std::vector<at::Tensor>& outputs) {
  if (type == c10d::OpType::BARRIER || type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
      type == c10d::OpType::RECVANYSOURCE || type == c10d::OpType::ALLTOALL ||
      type == c10d::OpType::ALLTOALL_BASE) {
    return false;
  }
  size_t bytes = 0;
  for (const at::Tensor& tensor : outputs) {
    if (!tensor.device().is_cpu()) return false;
    bytes += tensor.nbytes();
  }
  return bytes <= inline_bytes() && inline_bytes() > 0;
}

/// Runs a collective, returning what it threw.
std::exception_ptr run_catching(const std::function<void()>& run) {
  try {
    run();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// The process's one runner of collectives: whatever thread runs them, one runs at a time, in
/// the order the collectives were issued. Never destroyed: the interpreter may exit while its
/// worker waits for more.
///
/// A small collective issued while nothing is queued or running runs at once on the calling
/// thread (run_inline); any other is queued for the worker thread (push), which runs the queue
/// in order whenever no inline call is running. Whoever runs a collective holds `busy_`, so a
/// collective issued meanwhile queues behind it: libddl sees every call in issue order.
///
/// The worker never lets go of a tensor itself: a tensor made in Python may need the GIL to be
/// freed, and a thread that asks for the GIL while the interpreter shuts down is ended on the
/// spot (std::terminate, from a destructor). So a finished collective (its work, which holds
/// the output tensors, and its closure, which holds the inputs) is kept until the next push(),
/// which frees it on the caller's thread.
class CollectiveQueue {
 public:
  static CollectiveQueue& instance() {
    static CollectiveQueue* queue = new CollectiveQueue;
    return *queue;
  }

  /// Runs `run` now on this thread and completes `work`, when nothing is queued or running;
  /// false (nothing done) otherwise.
  bool run_inline(WorkDdl& work, const std::function<void()>& run) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (busy_ || !items_.empty()) return false;
      busy_ = true;
    }
    std::exception_ptr error;
    {
      // Outputs are written in place; autograd has no part in a collective.
      c10::AutoGradMode no_grad(false);
      error = run_catching(run);
    }
    release();
    // After busy_: the future's callbacks may issue (and wait for) further collectives.
    work.complete(error);
    return true;
  }

  void push(c10::intrusive_ptr<WorkDdl> work, std::function<void()> run) {
    std::vector<Item> finished;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back({std::move(work), std::move(run)});
      finished.swap(finished_);
    }
    cv_.notify_one();
  }  // `finished` is freed here, on the caller's thread

 private:
  struct Item {
    c10::intrusive_ptr<WorkDdl> work;
    std::function<void()> run;
  };

  CollectiveQueue() {
    std::thread([this] { loop(); }).detach();
  }

  /// Ends a run: clears busy_ and wakes the worker only when something was queued meanwhile (a
  /// wake-up for nothing costs a context switch per call).
  void release() {
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      queued = !items_.empty();
    }
    if (queued) cv_.notify_one();
  }

  void loop() {
    c10::AutoGradMode no_grad(false);
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !items_.empty() && !busy_; });
        item = std::move(items_.front());
        items_.pop_front();
        busy_ = true;
      }
      const std::exception_ptr error = run_catching(item.run);
      release();
      item.work->complete(error);
      // The caller may have let go of the work and its tensors already: they go to finished_,
      // not out of scope here.
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(std::move(item));
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool busy_ = false;           ///< a collective is running (on the worker or inline)
  std::vector<Item> finished_;  ///< run, not yet freed (see push())
};

/// For a CUDA tensor: waits until what the calling thread queued on its current stream of the
/// tensor's device has run. libddl's NCCL runs on streams of its own and each call returns once
/// its result is in place, so this is all the ordering a GPU buffer needs: before a collective,
/// for the kernels that wrote its inputs (on the caller's stream, or the worker's copies); after
/// it, for the worker's copies into the caller's tensors.
void settle(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return;
  c10::impl::VirtualGuardImpl guard(tensor.device().type());
  guard.getStream(tensor.device()).synchronize();
}

/// Runs `libddl_call` (a ddl_ function on buffers of `on`'s device) once the worker's copies
/// into them have run (settle); throws ddl::Error when it fails: "ddl backend: <what>: <the
/// runtime's message>".
template <typename Call>
void call(const char* what, const at::Tensor& on, Call libddl_call) {
  settle(on);
  const ddl_status_t status = libddl_call();
  if (status == DDL_SUCCESS) return;
  std::string message = ddl_last_error();
  if (message.empty()) message = ddl_error_string(status);
  // libddl's message may already name the collective ("broadcast: root 9 is not a rank").
  const std::string prefix = std::string(what) + ": ";
  if (message.rfind(prefix, 0) != 0) message = prefix + message;
  throw ddl::Error(status, "ddl backend: " + message);
}

ddl_datatype_t datatype_of(const at::Tensor& tensor, const char* what) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DDL_FLOAT32;
    case at::kDouble:
      return DDL_FLOAT64;
    case at::kHalf:
      return DDL_FLOAT16;
    case at::kBFloat16:
      return DDL_BFLOAT16;
    case at::kInt:
      return DDL_INT32;
    case at::kLong:
      return DDL_INT64;
    case at::kByte:
      return DDL_UINT8;
    default:
      TORCH_CHECK(false, "ddl backend: ", what, ": dtype ", tensor.scalar_type(),
                  " is not supported (it takes float32, float64, float16, bfloat16, int32, int64 "
                  "and uint8)");
  }
}

constexpr const char* kOpsTaken = " is not supported (it takes SUM, AVG, PRODUCT, MIN and MAX)";

ddl_op_t op_of(const c10d::ReduceOp& op, const char* what) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return DDL_SUM;
    case c10d::ReduceOp::AVG:
      return DDL_AVG;
    case c10d::ReduceOp::PRODUCT:
      return DDL_PROD;
    case c10d::ReduceOp::MIN:
      return DDL_MIN;
    case c10d::ReduceOp::MAX:
      return DDL_MAX;
    case c10d::ReduceOp::BAND:
      TORCH_CHECK(false, "ddl backend: ", what, ": reduce op BAND", kOpsTaken);
    case c10d::ReduceOp::BOR:
      TORCH_CHECK(false, "ddl backend: ", what, ": reduce op BOR", kOpsTaken);
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "ddl backend: ", what, ": reduce op BXOR", kOpsTaken);
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(false, "ddl backend: ", what, ": reduce op PREMUL_SUM", kOpsTaken);
    default:
      TORCH_CHECK(false, "ddl backend: ", what, ": reduce op ",
                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(op)), kOpsTaken);
  }
}

/// A dense tensor of a supported dtype, on the CPU (or on a GPU when libddl was built with its
/// NCCL path and DDL_NCCL is not 0), on the same device as `first` when given; or a c10::Error
/// saying what is wrong.
void check_tensor(const at::Tensor& tensor, const char* what, const at::Tensor* first = nullptr) {
  TORCH_CHECK(tensor.defined(), "ddl backend: ", what, ": an undefined tensor");
  if (tensor.is_cuda()) {
    TORCH_CHECK(kWithNccl, "ddl backend: ", what, ": a tensor on ", tensor.device(),
                "; this libddl was built without its NCCL path (no CUDA and NCCL headers when "
                "it was built), so the ddl backend takes CPU tensors only: move it to the CPU, "
                "or rebuild ddlrun where CUDA and NCCL are installed");
    const char* nccl = std::getenv("DDL_NCCL");
    TORCH_CHECK(nccl == nullptr || std::string(nccl) != "0", "ddl backend: ", what,
                ": a tensor on ", tensor.device(),
                " but DDL_NCCL=0 keeps GPU buffers away from libddl's NCCL path: unset it, or "
                "move the tensor to the CPU");
  } else {
    TORCH_CHECK(tensor.device().is_cpu(), "ddl backend: ", what, ": a tensor on ", tensor.device(),
                "; it takes CPU and CUDA tensors");
  }
  TORCH_CHECK(first == nullptr || tensor.device() == first->device(), "ddl backend: ", what,
              ": tensors on ", first->device(), " and ", tensor.device(),
              "; the tensors of one call must be on one device");
  TORCH_CHECK(tensor.layout() == at::kStrided, "ddl backend: ", what, ": a ", tensor.layout(),
              " tensor; it takes dense tensors");
  datatype_of(tensor, what);
}

/// The single tensor of a one-tensor list.
void check_one(size_t n, const char* what) {
  TORCH_CHECK(n == 1, "ddl backend: ", what, ": takes one tensor per process, got ", n);
}

/// gather's output lists or scatter's input lists (`n` of them, each a list of `kind`s): one on
/// the root, none elsewhere.
void check_root_lists(size_t n, const char* kind, bool root, const char* what) {
  TORCH_CHECK(n == (root ? 1u : 0u), "ddl backend: ", what, ": ", n, " ", kind, " lists on ",
              root ? "the root" : "a rank that is not the root", " (it takes ",
              root ? "one" : "none", ")");
}

/// The per-rank tensors of allgather's or gather's outputs, or of reduce_scatter's or scatter's
/// inputs (`many`, each an `many_name`: "output", "input"), against the one tensor on the other
/// side (`one`, an `one_name`): one per rank of `ranks`, each on `one`'s device, of its dtype
/// and size.
void check_one_per_rank(const std::vector<at::Tensor>& many, const char* many_name,
                        const at::Tensor& one, const char* one_name, int ranks, const char* what) {
  TORCH_CHECK(many.size() == static_cast<size_t>(ranks), "ddl backend: ", what, ": ", many.size(),
              " ", many_name, " tensors for ", ranks, " ranks");
  for (const at::Tensor& tensor : many) {
    check_tensor(tensor, what, &one);
    TORCH_CHECK(tensor.scalar_type() == one.scalar_type() && tensor.numel() == one.numel(),
                "ddl backend: ", what, ": an ", many_name, " of ", tensor.numel(), " ",
                tensor.scalar_type(), " for an ", one_name, " of ", one.numel(), " ",
                one.scalar_type());
  }
}

/// `tensor` itself when contiguous, else a contiguous copy (see write_back).
at::Tensor contiguous_of(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : tensor.contiguous();
}

/// Copies `contiguous` into `tensor` unless it is `tensor` itself.
void write_back(at::Tensor& tensor, const at::Tensor& contiguous) {
  if (contiguous.is_same(tensor)) return;
  tensor.copy_(contiguous);
  settle(tensor);
}

}  // namespace

WorkDdl::WorkDdl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void WorkDdl::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

ProcessGroupDdl::ProcessGroupDdl(int rank, int size) : c10d::ProcessGroup(rank, size) {
  TORCH_CHECK(ddl_initialized(),
              "ddl backend: libddl is not initialised; call ddl.init() before creating the "
              "group (init_process_group(\"ddl\") does it after `import ddl.torch`)");
  TORCH_CHECK(ddl_rank() == rank && ddl_size() == size, "ddl backend: torch asks for rank ", rank,
              " of ", size, " but the job is rank ", ddl_rank(), " of ", ddl_size(),
              "; libddl's collectives span the whole job, so a ddl group must hold every rank "
              "(use gloo for smaller groups)");
  init();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::enqueue(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> run) {
  // The kernels that wrote a GPU tensor ran on this thread's stream; the worker's are others.
  if (!outputs.empty()) settle(outputs[0]);
  const bool small = inlinable(type, outputs);
  auto work = c10::make_intrusive<WorkDdl>(rank_, type, std::move(outputs));
  CollectiveQueue& queue = CollectiveQueue::instance();
  if (small && queue.run_inline(*work, run)) return work;
  queue.push(work, std::move(run));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  check_one(tensors.size(), "broadcast");
  check_tensor(tensors[0], "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "ddl backend: broadcast: root tensor ", opts.rootTensor,
              " of a list of one");
  const int root = static_cast<int>(opts.rootRank);  // libddl checks it is a rank
  return enqueue(c10d::OpType::BROADCAST, tensors, [tensor = tensors[0], root]() mutable {
    at::Tensor buffer = contiguous_of(tensor);
    call("broadcast", buffer, [&] {
      return ddl_bcast(buffer.data_ptr(), buffer.numel(), datatype_of(buffer, "broadcast"), root);
    });
    write_back(tensor, buffer);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  check_one(tensors.size(), "allreduce");
  check_tensor(tensors[0], "allreduce");
  const ddl_op_t op = op_of(opts.reduceOp, "allreduce");
  return enqueue(c10d::OpType::ALLREDUCE, tensors, [tensor = tensors[0], op]() mutable {
    at::Tensor buffer = contiguous_of(tensor);
    call("allreduce", buffer, [&] {
      return ddl_allreduce(buffer.data_ptr(), buffer.data_ptr(), buffer.numel(),
                           datatype_of(buffer, "allreduce"), op);
    });
    write_back(tensor, buffer);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* what = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "ddl backend: ", what, ": no tensors");
  for (const at::Tensor& tensor : tensors) {
    check_tensor(tensor, what, &tensors[0]);
    TORCH_CHECK(tensor.scalar_type() == tensors[0].scalar_type(), "ddl backend: ", what,
                ": tensors of dtypes ", tensors[0].scalar_type(), " and ", tensor.scalar_type(),
                "; it takes tensors of one dtype");
  }
  const ddl_op_t op = op_of(opts.reduceOp, what);
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors, [tensors, op, what]() mutable {
    std::vector<at::Tensor> buffers;
    std::vector<void*> pointers;
    std::vector<size_t> counts;
    for (const at::Tensor& tensor : tensors) {
      buffers.push_back(contiguous_of(tensor));
      pointers.push_back(buffers.back().data_ptr());
      counts.push_back(buffers.back().numel());
    }
    call(what, tensors[0], [&] {
      return ddl_allreduce_n(pointers.data(), counts.data(), pointers.size(),
                             datatype_of(tensors[0], what), op);
    });
    for (size_t i = 0; i < tensors.size(); ++i)
      write_back(tensors[i], buffers[i]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  check_one(tensors.size(), "reduce");
  check_tensor(tensors[0], "reduce");
  const ddl_op_t op = op_of(opts.reduceOp, "reduce");
  const bool root = opts.rootRank == rank_;
  return enqueue(c10d::OpType::REDUCE, tensors, [tensor = tensors[0], op, root]() mutable {
    at::Tensor buffer = contiguous_of(tensor);
    // Only the root's tensor takes the result; the others reduce into scratch.
    at::Tensor result = root ? buffer : at::empty_like(buffer);
    call("reduce", buffer, [&] {
      return ddl_allreduce(buffer.data_ptr(), result.data_ptr(), buffer.numel(),
                           datatype_of(buffer, "reduce"), op);
    });
    if (root) write_back(tensor, buffer);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const char* what = "allgather";
  check_one(inputs.size(), what);
  check_one(outputs.size(), what);
  const at::Tensor& input = inputs[0];
  check_tensor(input, what);
  check_one_per_rank(outputs[0], "output", input, "input", size_, what);
  return enqueue(
      c10d::OpType::ALLGATHER, outputs[0], [input, outputs = outputs[0], what]() mutable {
        at::Tensor buffer = contiguous_of(input);
        const int64_t n = buffer.numel();
        at::Tensor gathered =
            at::empty({n * static_cast<int64_t>(outputs.size())}, buffer.options());
        call(what, buffer, [&] {
          return ddl_allgather(buffer.data_ptr(), gathered.data_ptr(), n,
                               datatype_of(buffer, what));
        });
        for (size_t i = 0; i < outputs.size(); ++i) {
          outputs[i].copy_(
              gathered.narrow(0, static_cast<int64_t>(i) * n, n).view(outputs[i].sizes()));
        }
        settle(gathered);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::_allgather_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                const c10d::AllgatherOptions&) {
  const char* what = "_allgather_base";
  check_tensor(input, what);
  check_tensor(output, what, &input);
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "ddl backend: ", what, ": the output must hold ", size_, " x ", input.numel(), " ",
      input.scalar_type(), ", not ", output.numel(), " ", output.scalar_type());
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [input, output, what]() mutable {
    at::Tensor in = contiguous_of(input);
    at::Tensor out = contiguous_of(output);
    call(what, in, [&] {
      return ddl_allgather(in.data_ptr(), out.data_ptr(), in.numel(), datatype_of(in, what));
    });
    write_back(output, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  check_one(inputs.size(), what);
  const at::Tensor& input = inputs[0];
  check_tensor(input, what);
  const bool root = opts.rootRank == rank_;
  check_root_lists(outputs.size(), "output", root, what);
  std::vector<at::Tensor> parts = root ? outputs[0] : std::vector<at::Tensor>();
  if (root) check_one_per_rank(parts, "output", input, "input", size_, what);
  if (!root) settle(input);  // enqueue settles the outputs, which only the root has
  return enqueue(c10d::OpType::GATHER, parts, [input, parts, what]() mutable {
    at::Tensor buffer = contiguous_of(input);
    const int64_t n = buffer.numel();
    at::Tensor gathered = at::empty({n * ddl_size()}, buffer.options());
    call(what, buffer, [&] {
      return ddl_allgather(buffer.data_ptr(), gathered.data_ptr(), n, datatype_of(buffer, what));
    });
    for (size_t i = 0; i < parts.size(); ++i) {
      parts[i].copy_(gathered.narrow(0, static_cast<int64_t>(i) * n, n).view(parts[i].sizes()));
    }
    settle(gathered);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  check_one(outputs.size(), what);
  const at::Tensor& output = outputs[0];
  check_tensor(output, what);
  const bool root = opts.rootRank == rank_;
  const int root_rank = static_cast<int>(opts.rootRank);
  check_root_lists(inputs.size(), "input", root, what);
  std::vector<at::Tensor> parts = root ? inputs[0] : std::vector<at::Tensor>();
  if (root) check_one_per_rank(parts, "input", output, "output", size_, what);
  const int rank = rank_;
  return enqueue(c10d::OpType::SCATTER, outputs, [output, parts, root_rank, rank, what]() mutable {
    const int64_t n = output.numel();
    at::Tensor all;
    if (parts.empty()) {
      all = at::empty({n * ddl_size()}, output.options());
    } else {
      std::vector<at::Tensor> flat;
      for (const at::Tensor& part : parts)
        flat.push_back(part.reshape({-1}));
      all = at::cat(flat);
    }
    call(what, all,
         [&] { return ddl_bcast(all.data_ptr(), all.numel(), datatype_of(all, what), root_rank); });
    output.copy_(all.narrow(0, rank * n, n).view(output.sizes()));
    settle(output);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  check_one(outputs.size(), what);
  check_one(inputs.size(), what);
  const at::Tensor& output = outputs[0];
  check_tensor(output, what);
  check_one_per_rank(inputs[0], "input", output, "output", size_, what);
  const ddl_op_t op = op_of(opts.reduceOp, what);
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs,
                 [output = outputs[0], inputs = inputs[0], op, what]() mutable {
                   std::vector<at::Tensor> flat;
                   for (const at::Tensor& input : inputs)
                     flat.push_back(input.reshape({-1}));
                   at::Tensor all = at::cat(flat);
                   at::Tensor out = contiguous_of(output);
                   call(what, all, [&] {
                     return ddl_reduce_scatter(all.data_ptr(), out.data_ptr(), out.numel(),
                                               datatype_of(out, what), op);
                   });
                   write_back(output, out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* what = "_reduce_scatter_base";
  check_tensor(input, what);
  check_tensor(output, what, &input);
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "ddl backend: ", what, ": the input must hold ", size_, " x ", output.numel(), " ",
      output.scalar_type(), ", not ", input.numel(), " ", input.scalar_type());
  const ddl_op_t op = op_of(opts.reduceOp, what);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [input, output, op, what]() mutable {
    at::Tensor in = contiguous_of(input);
    at::Tensor out = contiguous_of(output);
    call(what, in, [&] {
      return ddl_reduce_scatter(in.data_ptr(), out.data_ptr(), out.numel(), datatype_of(out, what),
                                op);
    });
    write_back(output, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {},
                 [] { call("barrier", at::Tensor(), [] { return ddl_barrier(); }); });
}

}  // namespace ddl::python
