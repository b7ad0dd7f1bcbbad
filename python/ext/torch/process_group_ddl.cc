#include "process_group_ddl.h"

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <tuple>
#include <utility>

#include "base/table.h"
#include "ddl/ddl.h"
#include "ddl/ddl.hpp"
#include "run_queue.h"

namespace ddl::python {
namespace {

/// Whether libddl takes GPU buffers (built with its NCCL path: DDL_HAVE_NCCL in CMake).
#ifdef DDL_PG_WITH_NCCL
constexpr bool kWithNccl = true;
#else
constexpr bool kWithNccl = false;
#endif

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
  // A transfer that made no progress for the timeout reads as torch's timeouts do.
  if (status == DDL_ERR_TRANSPORT && message.find(": no progress for ") != std::string::npos)
    message = "Timed out (" + message + ")";
  if (message.rfind(prefix, 0) != 0) message = prefix + message;
  throw ddl::Error(status, "ddl backend: " + message);
}

/// torch.uint16 (at::kUInt16) exists from torch 2.3 on; Debian's torch 1.13 has none.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define DDL_TORCH_UINT16 1
constexpr const char* kUint16Taken = ", uint16";
#else
#define DDL_TORCH_UINT16 0
constexpr const char* kUint16Taken = "";
#endif

/// libddl's type of each torch dtype the backend takes (and at::kUInt16 where torch has it).
constexpr std::pair<at::ScalarType, ddl_datatype_t> kTypes[] = {
    {at::kFloat, DDL_FLOAT32},     {at::kDouble, DDL_FLOAT64}, {at::kHalf, DDL_FLOAT16},
    {at::kBFloat16, DDL_BFLOAT16}, {at::kInt, DDL_INT32},      {at::kLong, DDL_INT64},
    {at::kByte, DDL_UINT8},        {at::kChar, DDL_INT8},      {at::kShort, DDL_INT16},
    {at::kBool, DDL_BOOL}};

ddl_datatype_t datatype_of(const at::Tensor& tensor, const char* what) {
  if (const auto type = base::lookup(kTypes, tensor.scalar_type())) return *type;
#if DDL_TORCH_UINT16
  if (tensor.scalar_type() == at::kUInt16) return DDL_UINT16;
#endif
  TORCH_CHECK(false, "ddl backend: ", what, ": dtype ", tensor.scalar_type(),
              " is not supported (it takes float32, float64, float16, bfloat16, int8, int16, "
              "int32, int64, uint8",
              kUint16Taken, " and bool)");
}

constexpr const char* kOpsTaken =
    " is not supported (it takes SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR and BXOR)";

/// libddl's reduction of each torch reduce op the backend takes.
constexpr std::pair<c10d::ReduceOp::RedOpType, ddl_op_t> kOps[] = {
    {c10d::ReduceOp::SUM, DDL_SUM},      {c10d::ReduceOp::AVG, DDL_AVG},
    {c10d::ReduceOp::PRODUCT, DDL_PROD}, {c10d::ReduceOp::MIN, DDL_MIN},
    {c10d::ReduceOp::MAX, DDL_MAX},      {c10d::ReduceOp::BAND, DDL_BAND},
    {c10d::ReduceOp::BOR, DDL_BOR},      {c10d::ReduceOp::BXOR, DDL_BXOR}};

ddl_op_t op_of(const c10d::ReduceOp& op, const char* what) {
  const auto type = static_cast<c10d::ReduceOp::RedOpType>(op);
  if (const auto ddl_op = base::lookup(kOps, type)) return *ddl_op;
  TORCH_CHECK(type != c10d::ReduceOp::PREMUL_SUM, "ddl backend: ", what, ": reduce op PREMUL_SUM",
              kOpsTaken);
  TORCH_CHECK(false, "ddl backend: ", what, ": reduce op ", static_cast<int>(type), kOpsTaken);
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

/// The tensor of a one-tensor list, checked (check_tensor).
const at::Tensor& check_single(const std::vector<at::Tensor>& tensors, const char* what) {
  check_one(tensors.size(), what);
  check_tensor(tensors[0], what);
  return tensors[0];
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

/// The elements of `tensors` one after the other, in one new flat tensor.
at::Tensor concatenated(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& tensor : tensors)
    flat.push_back(tensor.reshape({-1}));
  return at::cat(flat);
}

/// On the worker: one libddl allgather of every group rank's `input` (`size` ranks), rank i's
/// copied into parts[i] (gather: none kept on a rank whose `parts` is empty).
void gather_into(ddl_group_t group, int size, const at::Tensor& input,
                 const std::vector<at::Tensor>& parts, const char* what) {
  at::Tensor buffer = contiguous_of(input);
  const int64_t n = buffer.numel();
  at::Tensor gathered = at::empty({n * size}, buffer.options());
  call(what, buffer, [&] {
    return ddl_group_allgather(group, buffer.data_ptr(), gathered.data_ptr(), n,
                               datatype_of(buffer, what));
  });
  for (size_t i = 0; i < parts.size(); ++i) {
    at::Tensor part = parts[i];
    part.copy_(gathered.narrow(0, static_cast<int64_t>(i) * n, n).view(part.sizes()));
  }
  settle(gathered);
}

/// On the worker: `libddl_call(data, count, type)` on `tensor`'s elements (a contiguous copy
/// where it is not contiguous, written back afterwards unless `reads_only`); see call().
template <typename Call>
void on_elements(at::Tensor& tensor, const char* what, Call libddl_call, bool reads_only = false) {
  at::Tensor buffer = contiguous_of(tensor);
  call(what, buffer, [&] {
    return libddl_call(buffer.data_ptr(), static_cast<size_t>(buffer.numel()),
                       datatype_of(buffer, what));
  });
  if (!reads_only) write_back(tensor, buffer);
}

}  // namespace

WorkDdl::WorkDdl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

int WorkDdl::sourceRank() const {
  if (!source_) return c10d::Work::sourceRank();
  return source_->load();
}

void WorkDdl::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

ProcessGroupDdl::ProcessGroupDdl(int rank, int size, std::vector<int> ranks,
                                 c10::intrusive_ptr<c10d::Store> store, double timeout)
    : TorchBackend(rank, size), timeout_(timeout), store_ddl_(std::move(store)) {
  TORCH_CHECK(ddl_initialized(),
              "ddl backend: libddl is not initialised; call ddl.init() before creating the "
              "group (init_process_group(\"ddl\") does it after `import ddl.torch`)");
  init();
  if (ranks.empty() && timeout > 0) {  // the job's ranks, as a group of their own
    ranks.resize(static_cast<size_t>(ddl_size()));
    std::iota(ranks.begin(), ranks.end(), 0);
  }
  if (ranks.empty()) {
    TORCH_CHECK(ddl_rank() == rank && ddl_size() == size, "ddl backend: torch asks for rank ", rank,
                " of ", size, " but the job is rank ", ddl_rank(), " of ", ddl_size(),
                "; the default group is the whole job (new_group makes smaller ones)");
    group_ = ddl_group_world();
    return;
  }
  TORCH_CHECK(static_cast<int>(ranks.size()) == size && rank >= 0 && rank < size &&
                  ranks[rank] == ddl_rank(),
              "ddl backend: new_group: torch asks for group rank ", rank, " of ", size,
              " but this is job rank ", ddl_rank(), " and the group's ranks are ",
              c10::Join(", ", ranks));
  // Made in the collectives' order: every member creates it between the same collectives.
  ddl_group_t* made = &group_;
  enqueue(c10d::OpType::UNKNOWN, {}, [ranks, made, timeout] {
    call("new_group", at::Tensor(),
         [&] { return ddl_group_create(ranks.data(), static_cast<int>(ranks.size()), made); });
    if (timeout > 0) {
      call("new_group", at::Tensor(), [&] { return ddl_group_set_timeout(*made, timeout); });
    }
  })->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::enqueue(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> run,
                                                        RunQueue* queue) {
  // The kernels that wrote a GPU tensor ran on this thread's stream; the worker's are others.
  if (!outputs.empty()) settle(outputs[0]);
  if (queue == nullptr && type != c10d::OpType::UNKNOWN) ++sequence_;
  const bool small = queue == nullptr && RunQueue::inlinable(type, outputs);
  auto work = c10::make_intrusive<WorkDdl>(rank_, type, std::move(outputs));
  if (queue == nullptr) queue = &RunQueue::collectives();
  if (small && queue->run_inline(*work, run)) return work;
  queue->push(work, std::move(run));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  check_single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "ddl backend: broadcast: root tensor ", opts.rootTensor,
              " of a list of one");
  const int root = static_cast<int>(opts.rootRank);  // libddl checks it is a rank
  return enqueue(c10d::OpType::BROADCAST, tensors,
                 [group = group_, tensor = tensors[0], root]() mutable {
                   on_elements(tensor, "broadcast", [&](void* data, size_t n, ddl_datatype_t type) {
                     return ddl_group_bcast(group, data, n, type, root);
                   });
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  check_one(tensors.size(), "allreduce");
  if (tensors[0].defined() && tensors[0].is_sparse())
    return allreduce_sparse(tensors[0], opts.reduceOp);
  check_tensor(tensors[0], "allreduce");
  const ddl_op_t op = op_of(opts.reduceOp, "allreduce");
  return enqueue(c10d::OpType::ALLREDUCE, tensors,
                 [group = group_, tensor = tensors[0], op]() mutable {
                   on_elements(tensor, "allreduce", [&](void* data, size_t n, ddl_datatype_t type) {
                     return ddl_group_allreduce(group, data, data, n, type, op);
                   });
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
  return enqueue(
      c10d::OpType::ALLREDUCE_COALESCED, tensors, [group = group_, tensors, op, what]() mutable {
        std::vector<at::Tensor> buffers;
        std::vector<void*> pointers;
        std::vector<size_t> counts;
        for (const at::Tensor& tensor : tensors) {
          buffers.push_back(contiguous_of(tensor));
          pointers.push_back(buffers.back().data_ptr());
          counts.push_back(buffers.back().numel());
        }
        call(what, tensors[0], [&] {
          return ddl_group_allreduce_n(group, pointers.data(), counts.data(), pointers.size(),
                                       datatype_of(tensors[0], what), op);
        });
        for (size_t i = 0; i < tensors.size(); ++i)
          write_back(tensors[i], buffers[i]);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  check_single(tensors, "reduce");
  const ddl_op_t op = op_of(opts.reduceOp, "reduce");
  const bool root = opts.rootRank == rank_;
  return enqueue(c10d::OpType::REDUCE, tensors,
                 [group = group_, tensor = tensors[0], op, root]() mutable {
                   at::Tensor buffer = contiguous_of(tensor);
                   // Only the root's tensor takes the result; the others reduce into scratch.
                   at::Tensor result = root ? buffer : at::empty_like(buffer);
                   call("reduce", buffer, [&] {
                     return ddl_group_allreduce(group, buffer.data_ptr(), result.data_ptr(),
                                                buffer.numel(), datatype_of(buffer, "reduce"), op);
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
  return enqueue(c10d::OpType::ALLGATHER, outputs[0],
                 [group = group_, size = size_, input, outputs = outputs[0], what] {
                   gather_into(group, size, input, outputs, what);
                 });
}

namespace {

/// all_gather_into_tensor's pair (`output` holds `size` x `input`) or, when `scatters`,
/// reduce_scatter_tensor's (`input` holds `size` x `output`), of one dtype.
void check_pair(const at::Tensor& output, const at::Tensor& input, int size, bool scatters,
                const char* what) {
  check_tensor(input, what);
  check_tensor(output, what, &input);
  const at::Tensor& whole = scatters ? input : output;
  const at::Tensor& share = scatters ? output : input;
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && whole.numel() == share.numel() * size,
              "ddl backend: ", what, ": the ", scatters ? "input" : "output", " must hold ", size,
              " x ", share.numel(), " ", share.scalar_type(), ", not ", whole.numel(), " ",
              whole.scalar_type());
}

#if DDL_TORCH2
/// The pairs of a coalesced all_gather_into_tensor or reduce_scatter_tensor (check_pair).
void check_pairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                 int size, bool scatters, const char* what) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ddl backend: ", what, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    check_pair(outputs[i], inputs[i], size, scatters, what);
}
#endif

/// Runs one all_gather_into_tensor on the worker.
void run_allgather(ddl_group_t group, const at::Tensor& input, at::Tensor& output,
                   const char* what) {
  at::Tensor in = contiguous_of(input);
  at::Tensor out = contiguous_of(output);
  call(what, in, [&] {
    return ddl_group_allgather(group, in.data_ptr(), out.data_ptr(), in.numel(),
                               datatype_of(in, what));
  });
  write_back(output, out);
}

/// Runs one reduce_scatter_tensor on the worker.
void run_reduce_scatter(ddl_group_t group, const at::Tensor& input, at::Tensor& output, ddl_op_t op,
                        const char* what) {
  at::Tensor in = contiguous_of(input);
  at::Tensor out = contiguous_of(output);
  call(what, in, [&] {
    return ddl_group_reduce_scatter(group, in.data_ptr(), out.data_ptr(), out.numel(),
                                    datatype_of(out, what), op);
  });
  write_back(output, out);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::_allgather_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                const c10d::AllgatherOptions&) {
  const char* what = "_allgather_base";
  check_pair(output, input, size_, false, what);
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output},
                 [group = group_, input, output, what]() mutable {
                   run_allgather(group, input, output, what);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  const at::Tensor& input = check_single(inputs, what);
  const bool root = opts.rootRank == rank_;
  check_root_lists(outputs.size(), "output", root, what);
  std::vector<at::Tensor> parts = root ? outputs[0] : std::vector<at::Tensor>();
  if (root) check_one_per_rank(parts, "output", input, "input", size_, what);
  if (!root) settle(input);  // enqueue settles the outputs, which only the root has
  return enqueue(c10d::OpType::GATHER, parts, [group = group_, size = size_, input, parts, what] {
    gather_into(group, size, input, parts, what);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  const at::Tensor& output = check_single(outputs, what);
  const bool root = opts.rootRank == rank_;
  const int root_rank = static_cast<int>(opts.rootRank);
  check_root_lists(inputs.size(), "input", root, what);
  std::vector<at::Tensor> parts = root ? inputs[0] : std::vector<at::Tensor>();
  if (root) check_one_per_rank(parts, "input", output, "output", size_, what);
  const int rank = rank_;
  return enqueue(c10d::OpType::SCATTER, outputs,
                 [group = group_, size = size_, output, parts, root_rank, rank, what]() mutable {
                   const int64_t n = output.numel();
                   at::Tensor all = parts.empty() ? at::empty({n * size}, output.options())
                                                  : concatenated(parts);
                   call(what, all, [&] {
                     return ddl_group_bcast(group, all.data_ptr(), all.numel(),
                                            datatype_of(all, what), root_rank);
                   });
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
                 [group = group_, output = outputs[0], inputs = inputs[0], op, what]() mutable {
                   run_reduce_scatter(group, concatenated(inputs), output, op, what);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* what = "_reduce_scatter_base";
  check_pair(output, input, size_, true, what);
  const ddl_op_t op = op_of(opts.reduceOp, what);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [group = group_, input, output, op, what]() mutable {
                   run_reduce_scatter(group, input, output, op, what);
                 });
}

#if DDL_TORCH2
c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const char* what = "allgather_into_tensor_coalesced";
  check_pairs(outputs, inputs, size_, false, what);
  return enqueue(c10d::OpType::COALESCED, outputs,
                 [group = group_, inputs, outputs, what]() mutable {
                   for (size_t i = 0; i < inputs.size(); ++i)
                     run_allgather(group, inputs[i], outputs[i], what);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor_coalesced";
  check_pairs(outputs, inputs, size_, true, what);
  const ddl_op_t op = op_of(opts.reduceOp, what);
  return enqueue(c10d::OpType::COALESCED, outputs,
                 [group = group_, inputs, outputs, op, what]() mutable {
                   for (size_t i = 0; i < inputs.size(); ++i)
                     run_reduce_scatter(group, inputs[i], outputs[i], op, what);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::endCoalescing() {
  // The collectives' queue runs in issue order: this no-op completes after all before it.
  return enqueue(c10d::OpType::COALESCED, {}, [] {});
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {}, [group = group_] {
    call("barrier", at::Tensor(), [&] { return ddl_group_barrier(group); });
  });
}

namespace {

/// One count per group rank, in elements: `splits` rows of `tensor` each (its rows divided
/// evenly when `splits` is empty), with their offsets; or a c10::Error naming `what`.
void block_counts(const at::Tensor& tensor, const std::vector<int64_t>& splits, int size,
                  const char* side, const char* what, std::vector<size_t>& counts,
                  std::vector<size_t>& offsets) {
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const int64_t per_row = rows == 0 ? 0 : tensor.numel() / rows;
  std::vector<int64_t> split = splits;
  if (split.empty()) {
    TORCH_CHECK(rows % size == 0, "ddl backend: ", what, ": the ", side, "'s ", rows,
                " rows do not divide into ", size, " equal blocks; give split sizes");
    split.assign(size, rows / size);
  }
  TORCH_CHECK(static_cast<int>(split.size()) == size, "ddl backend: ", what, ": ", split.size(),
              " ", side, " split sizes for ", size, " ranks");
  size_t offset = 0;
  for (int64_t rows_of : split) {
    TORCH_CHECK(rows_of >= 0, "ddl backend: ", what, ": a negative split size");
    counts.push_back(static_cast<size_t>(rows_of * per_row));
    offsets.push_back(offset);
    offset += counts.back();
  }
  TORCH_CHECK(offset == static_cast<size_t>(tensor.numel()), "ddl backend: ", what, ": the ", side,
              " split sizes add up to ", offset / std::max<int64_t>(per_row, 1),
              " rows, the tensor has ", rows);
}

/// The message peer `peer` of `group` as a job rank (its queue's key); a c10::Error otherwise.
int job_rank_of(ddl_group_t group, int peer, const char* what) {
  const int rank = ddl_group_global_rank(group, peer);
  TORCH_CHECK(rank >= 0, "ddl backend: ", what, ": rank ", peer, " is not in the group (it has ",
              ddl_group_size(group), " ranks)");
  return rank;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions&) {
  const char* what = "all_to_all_single";
  check_tensor(input, what);
  check_tensor(output, what, &input);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ddl backend: ", what, ": input of ",
              input.scalar_type(), ", output of ", output.scalar_type());
  std::vector<size_t> send_counts, send_offsets, recv_counts, recv_offsets;
  block_counts(input, inputSplitSizes, size_, "input", what, send_counts, send_offsets);
  block_counts(output, outputSplitSizes, size_, "output", what, recv_counts, recv_offsets);
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output},
                 [group = group_, input, output, send_counts, send_offsets, recv_counts,
                  recv_offsets, what]() mutable {
                   at::Tensor in = contiguous_of(input);
                   at::Tensor out = contiguous_of(output);
                   call(what, in, [&] {
                     return ddl_group_alltoallv(group, in.data_ptr(), send_counts.data(),
                                                send_offsets.data(), out.data_ptr(),
                                                recv_counts.data(), recv_offsets.data(),
                                                datatype_of(in, what));
                   });
                   write_back(output, out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions&) {
  const char* what = "all_to_all";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "ddl backend: ", what, ": ", inputs.size(), " inputs and ", outputs.size(),
              " outputs for ", size_, " ranks");
  std::vector<size_t> send_counts, send_offsets, recv_counts, recv_offsets;
  for (auto [list, counts, offsets] : {std::tie(inputs, send_counts, send_offsets),
                                       std::tie(outputs, recv_counts, recv_offsets)}) {
    size_t offset = 0;
    for (const at::Tensor& tensor : list) {
      check_tensor(tensor, what, &inputs[0]);
      TORCH_CHECK(tensor.scalar_type() == inputs[0].scalar_type(), "ddl backend: ", what,
                  ": tensors of ", inputs[0].scalar_type(), " and ", tensor.scalar_type());
      counts.push_back(tensor.numel());
      offsets.push_back(offset);
      offset += tensor.numel();
    }
  }
  return enqueue(
      c10d::OpType::ALLTOALL, outputs,
      [group = group_, inputs, outputs, send_counts, send_offsets, recv_counts, recv_offsets,
       what]() mutable {
        at::Tensor in = concatenated(inputs);
        at::Tensor out = at::empty({static_cast<int64_t>(recv_offsets.back() + recv_counts.back())},
                                   in.options());
        call(what, in, [&] {
          return ddl_group_alltoallv(group, in.data_ptr(), send_counts.data(), send_offsets.data(),
                                     out.data_ptr(), recv_counts.data(), recv_offsets.data(),
                                     datatype_of(in, what));
        });
        for (size_t i = 0; i < outputs.size(); ++i) {
          outputs[i].copy_(out.narrow(0, recv_offsets[i], recv_counts[i]).view(outputs[i].sizes()));
        }
        settle(out);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  check_single(tensors, "send");
  RunQueue& queue = RunQueue::messages(true, job_rank_of(group_, dst, "send"));
  return enqueue(
      c10d::OpType::SEND, tensors,
      [group = group_, tensor = tensors[0], dst, tag]() mutable {
        on_elements(
            tensor, "send",
            [&](void* data, size_t n, ddl_datatype_t type) {
              return ddl_group_send(group, data, n, type, dst, tag);
            },
            true);
      },
      &queue);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  check_single(tensors, "recv");
  RunQueue& queue = RunQueue::messages(false, job_rank_of(group_, src, "recv"));
  return enqueue(
      c10d::OpType::RECV, tensors,
      [group = group_, tensor = tensors[0], src, tag]() mutable {
        on_elements(tensor, "recv", [&](void* data, size_t n, ddl_datatype_t type) {
          return ddl_group_recv(group, data, n, type, src, tag);
        });
      },
      &queue);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  check_single(tensors, "recv");
  auto source = std::make_shared<std::atomic<int>>(-1);
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::RECVANYSOURCE, tensors,
      [group = group_, tensor = tensors[0], tag, source]() mutable {
        int from = -1;
        on_elements(tensor, "recv", [&](void* data, size_t n, ddl_datatype_t type) {
          return ddl_group_recv_any(group, data, n, type, tag, &from);
        });
        source->store(from);
      },
      &RunQueue::messages(false, RunQueue::kAnySource));
  static_cast<WorkDdl&>(*work).set_source(source);
  return work;
}

#if DDL_TORCH2
c10::intrusive_ptr<c10d::Backend> ProcessGroupDdl::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  const auto self = std::find(sorted.begin(), sorted.end(), rank_);
  if (self == sorted.end()) return nullptr;
  std::vector<int> job_ranks;
  for (int r : sorted) {
    TORCH_CHECK(r >= 0 && r < size_, "ddl backend: split_group: ", r,
                " is not a rank of the group (0..", size_ - 1, ")");
    job_ranks.push_back(ddl_group_global_rank(group_, r));
  }
  const bool own = opts && opts->timeout != ::kBackendDefaultTimeout;
  return c10::make_intrusive<ProcessGroupDdl>(
      static_cast<int>(self - sorted.begin()), static_cast<int>(sorted.size()), job_ranks, store,
      own ? std::chrono::duration<double>(opts->timeout).count() : 0.0);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupDdl::getBackendOptions() {
  const auto timeout = timeout_ > 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::duration<double>(timeout_))
                                    : ::kBackendDefaultTimeout;
  return c10::make_intrusive<Options>("ddl", timeout);
}
#endif

}  // namespace ddl::python

namespace ddl::python {
namespace {

/// Each tensor's bytes, flattened (a contiguous copy where it is not contiguous).
at::Tensor bytes_of(const at::Tensor& tensor) {
  return contiguous_of(tensor).reshape({-1}).view(at::kByte);
}

}  // namespace

// all_gather_coalesced, how it works: every rank packs the bytes of its inputs one after the
// other (the same sizes on every rank, which torch requires), one libddl allgather of uint8
// gives every rank all of them, rank r's pack at r * pack bytes, and each output takes its
// slice viewed as its own dtype. Inputs of several dtypes travel in the one call.
c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const char* what = "all_gather_coalesced";
  TORCH_CHECK(!inputs.empty(), "ddl backend: ", what, ": no input tensors");
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_, "ddl backend: ", what, ": ",
              outputLists.size(), " output lists for ", size_, " ranks");
  std::vector<at::Tensor> outputs;
  for (const std::vector<at::Tensor>& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "ddl backend: ", what, ": an output list of ",
                list.size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_tensor(inputs[i], what, &inputs[0]);
      check_one_per_rank({list[i]}, "output", inputs[i], "input", 1, what);
      outputs.push_back(list[i]);
    }
  }
  return enqueue(
      c10d::OpType::ALLGATHER_COALESCED, outputs,
      [group = group_, inputs, outputs, what]() mutable {
        std::vector<at::Tensor> packs;
        for (const at::Tensor& input : inputs)
          packs.push_back(bytes_of(input));
        at::Tensor pack = at::cat(packs);
        const int64_t n = pack.numel();
        at::Tensor all =
            at::empty({n * static_cast<int64_t>(outputs.size() / inputs.size())}, pack.options());
        call(what, pack, [&] {
          return ddl_group_allgather(group, pack.data_ptr(), all.data_ptr(), n, DDL_UINT8);
        });
        int64_t offset = 0;
        for (at::Tensor& output : outputs) {
          const int64_t bytes = static_cast<int64_t>(output.nbytes());
          // A copy: a view as a wider dtype needs an aligned start.
          output.copy_(
              all.narrow(0, offset, bytes).clone().view(output.scalar_type()).view(output.sizes()));
          offset += bytes;
        }
        settle(all);
      });
}

namespace {

/// Every rank's rows of `rows` (a 2-d or more tensor whose first axis may differ between ranks),
/// one after the other in group rank order: libddl's allgatherv of `counts[r]` rows from rank r.
at::Tensor allgather_rows(ddl_group_t group, const at::Tensor& rows,
                          const std::vector<int64_t>& counts, const char* what) {
  int64_t row_size = 1;
  for (int64_t d = 1; d < rows.dim(); ++d)
    row_size *= rows.size(d);
  std::vector<size_t> recv_counts, displs;
  int64_t total = 0;
  for (int64_t count : counts) {
    recv_counts.push_back(static_cast<size_t>(count * row_size));
    displs.push_back(static_cast<size_t>(total * row_size));
    total += count;
  }
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = total;
  at::Tensor all = at::empty(shape, rows.options());
  call(what, rows, [&] {
    return ddl_group_allgatherv(group, rows.data_ptr(), static_cast<size_t>(rows.numel()),
                                all.data_ptr(), recv_counts.data(), displs.data(),
                                datatype_of(rows, what));
  });
  return all;
}

/// The sparse allreduce's steps on the worker (see allreduce_sparse).
void run_sparse_allreduce(ddl_group_t group, int size, at::Tensor& tensor) {
  const char* what = "allreduce";
  at::Tensor input = tensor.coalesce();
  at::Tensor indices = input.indices().t().contiguous();  // nnz x sparse_dim
  at::Tensor values = input.values().contiguous();        // nnz x dense sizes
  at::Tensor nnz = at::full({1}, input._nnz(), at::kLong);
  at::Tensor counts = at::empty({size}, at::kLong);
  call(what, nnz,
       [&] { return ddl_group_allgather(group, nnz.data_ptr(), counts.data_ptr(), 1, DDL_INT64); });
  std::vector<int64_t> rows(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + size);
  at::Tensor all_indices = allgather_rows(group, indices, rows, what);
  at::Tensor all_values = allgather_rows(group, values, rows, what);
  at::Tensor sum =
      at::sparse_coo_tensor(all_indices.t(), all_values, input.sizes(), input.options()).coalesce();
  tensor.copy_(sum);
}

}  // namespace

// Sparse allreduce, how it works: each rank coalesces its COO tensor (one entry per index), the
// ranks allgather their entry counts, then their indices (as rows of sparse_dim) and values
// (rows of the dense part) with libddl's allgatherv; every rank builds the tensor of all of
// them and coalesces it, which sums the entries that share an index. The result replaces the
// caller's tensor (torch's sparse copy_ takes the new entries), which the work's result holds.
// Only SUM, as gloo's.
c10::intrusive_ptr<c10d::Work> ProcessGroupDdl::allreduce_sparse(at::Tensor& tensor,
                                                                 const c10d::ReduceOp& op) {
  TORCH_CHECK(static_cast<c10d::ReduceOp::RedOpType>(op) == c10d::ReduceOp::SUM,
              "ddl backend: allreduce: a sparse tensor takes reduce op SUM only");
  TORCH_CHECK(tensor.device().is_cpu(), "ddl backend: allreduce: a sparse tensor on ",
              tensor.device(), "; sparse tensors must be on the CPU");
  datatype_of(tensor, "allreduce");
  return enqueue(c10d::OpType::ALLREDUCE, {tensor},
                 [group = group_, size = size_, tensor]() mutable {
                   run_sparse_allreduce(group, size, tensor);
                 });
}

#if DDL_TORCH2
c10::intrusive_ptr<c10d::ProcessGroup> GroupDdl::splitGroup(
    const std::vector<int>& ranks, const std::optional<std::chrono::milliseconds>& timeout,
    const std::optional<c10::intrusive_ptr<c10d::Backend::Options>>& opts,
    const std::optional<std::string>& name, const std::optional<std::string>& groupDesc,
    const std::optional<std::vector<c10::Device>>& devices) {
  c10::intrusive_ptr<c10d::ProcessGroup> split =
      c10d::ProcessGroup::splitGroup(ranks, timeout, opts, name, groupDesc, devices);
  if (!split) return split;
  auto group = c10::make_intrusive<GroupDdl>(split->getStore(), split->getRank(), split->getSize(),
                                             split->getDefaultBackend());
  group->setGroupName(split->getGroupName());
  group->setGroupDesc(split->getGroupDesc());
  return group;
}

GroupDdl::GroupDdl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   const c10::intrusive_ptr<c10d::Backend>& backend)
    : c10d::ProcessGroup(store, rank, size) {
  setDefaultBackend(BackendType::CUSTOM);
  setBackend(c10::DeviceType::CPU, BackendType::CUSTOM, backend);
  setBackend(c10::DeviceType::CUDA, BackendType::CUSTOM, backend);
}
#endif

}  // namespace ddl::python
