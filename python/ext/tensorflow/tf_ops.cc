// ddl._tf_ops: TensorFlow ops over libddl (ddl.tensorflow and horovod.tensorflow load it).
//
// How it works: four ops, DdlAllreduce (a list of tensors of one dtype, reduced by one
// ddl_allreduce_n call, which fuses them into large buckets), DdlAllgather (first dimensions
// may differ between ranks), DdlBroadcast and DdlAlltoall (optional splits), each an
// AsyncOpKernel, on the libddl group of its `group` attr (a handle of ddl._ddl.group_create,
// 0: the whole job; roots and sizes are group ranks and sizes). ComputeAsync checks its inputs
// and files a Request: the op's group, its name (the `ddl_name` attr, else the node's name,
// which a graph gives every rank alike), its signature (what every rank's op of that name must
// agree on: kind, dtype, shapes, op, root) and the work to do; then it returns, so TensorFlow's
// executor threads never block on the network. The requests are matched across ranks by name, not
// by the order each rank's executor happens to start them (a tf.compat.v1 graph starts independent
// ops in any order): Python's ddl.tensorflow runs a thread that takes each request (ddl_tf_next),
// hands it to ddl._negotiate with its group (ddl_tf_group), which agrees on the calls every member
// of the group has made, in one order, and checks their signatures before any data moves, and then
// runs the agreed ones on ddl's worker thread (ddl_tf_run: the work, then the op's done callback)
// or fails them on every rank (ddl_tf_fail: FAILED_PRECONDITION when the ranks' calls differ, and
// the job goes on). Outputs are new tensors (an input TensorFlow no longer needs is reused in
// place). Shapes that only the peers know (allgather's and alltoall's first dimension) are
// exchanged first with a small ddl_allgather/ddl_alltoall of int64s; then the output is allocated
// and filled by ddl_allgatherv/ddl_alltoallv. A failed libddl call sets the op's status to the
// runtime's message (ddl_last_error()): FAILED_PRECONDITION when the ranks' calls did not match
// (DDL_ERR_MISMATCH), UNAVAILABLE for a lost peer, INVALID_ARGUMENT for a bad argument, INTERNAL
// otherwise.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/table.h"
#include "ddl/ddl.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace ddl_tf {
namespace {

namespace tf = ::tensorflow;
using ShapeContext = tf::shape_inference::InferenceContext;

/// A status of absl's kind `make` whose message is `parts` joined (TensorFlow's errors::X(...)
/// helpers are deprecated).
template <absl::Status (*make)(absl::string_view), typename... Parts>
absl::Status failure(const Parts&... parts) {
  return make(absl::StrCat(parts...));
}

/// The collectives the ops asked for, until Python's negotiation thread runs or fails them.
class Requests {
 public:
  using Work = std::function<absl::Status()>;

  static Requests& instance() {
    static Requests* requests = new Requests;  // never destroyed: a thread may wait in next()
    return *requests;
  }

  /// Files the op's collective: `work` runs (on ddl's worker thread) once every rank has filed
  /// one of that name and signature; `done` is called after it, or after a failure.
  /// `group` is the op's group attr (0: the job).
  void add(int64_t group, std::string name, std::string signature, tf::OpKernelContext* context,
           tf::AsyncOpKernel::DoneCallback done, Work work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t id = next_id_++;
      table_.emplace(id, Request{group, std::move(name), std::move(signature), context,
                                 std::move(done), std::move(work)});
      ready_ids_.push_back(id);
    }
    ready_.notify_one();
  }

  /// Blocks until a request is filed; its id (its name and signature stay readable until it
  /// is run or failed).
  int64_t next() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return !ready_ids_.empty(); });
    const int64_t id = ready_ids_.front();
    ready_ids_.pop_front();
    return id;
  }

  const char* name(int64_t id) { return find(id).name.c_str(); }
  const char* signature(int64_t id) { return find(id).signature.c_str(); }
  int64_t group(int64_t id) { return find(id).group; }

  /// Runs the request's work (or, given `failed`, fails it with that) and calls its done.
  void finish(int64_t id, const absl::Status* failed = nullptr) {
    Request request = take(id);
    if (!request.done) return;
    request.context->SetStatus(failed != nullptr ? *failed : request.work());
    request.done();
  }

 private:
  struct Request {
    int64_t group = 0;
    std::string name, signature;
    tf::OpKernelContext* context = nullptr;
    tf::AsyncOpKernel::DoneCallback done;
    Work work;
  };

  Request& find(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    static Request none;
    auto it = table_.find(id);
    return it == table_.end() ? none : it->second;
  }

  Request take(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(id);
    if (it == table_.end()) return Request{};
    Request request = std::move(it->second);
    table_.erase(it);
    return request;
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::unordered_map<int64_t, Request> table_;
  std::deque<int64_t> ready_ids_;
  int64_t next_id_ = 1;
};

/// The status of a call that Python's negotiation failed, by ddl_tf_fail's codes: 0
/// FAILED_PRECONDITION, 1 INVALID_ARGUMENT, 2 UNAVAILABLE, anything else INTERNAL.
absl::Status failure_of(int code, const std::string& message) {
  constexpr absl::Status (*kKinds[])(absl::string_view) = {
      absl::FailedPreconditionError, absl::InvalidArgumentError, absl::UnavailableError,
      absl::InternalError};
  return kKinds[code >= 0 && code < 3 ? code : 3](message);
}

/// OK for a libddl call `what` that succeeded, else the TensorFlow status of its failure: the
/// ranks' calls did not match, a lost peer, a bad argument (failure_of's codes), or INTERNAL.
absl::Status checked(const std::string& what, ddl_status_t status) {
  if (status == DDL_SUCCESS) return absl::OkStatus();
  std::string message = ddl_last_error();
  if (message.empty()) message = ddl_error_string(status);
  const int code = status == DDL_ERR_MISMATCH                                   ? 0
                   : status == DDL_ERR_ARGUMENT                                 ? 1
                   : status == DDL_ERR_TRANSPORT || status == DDL_ERR_BOOTSTRAP ? 2
                                                                                : 3;
  return failure_of(code, "ddl " + what + ": " + message);
}

/// libddl's code of each TensorFlow dtype the ops take (kTypes below allows no other).
constexpr std::pair<tf::DataType, ddl_datatype_t> kDdlTypes[] = {
    {tf::DT_FLOAT, DDL_FLOAT32},     {tf::DT_DOUBLE, DDL_FLOAT64}, {tf::DT_HALF, DDL_FLOAT16},
    {tf::DT_BFLOAT16, DDL_BFLOAT16}, {tf::DT_INT32, DDL_INT32},    {tf::DT_INT64, DDL_INT64},
    {tf::DT_INT8, DDL_INT8},         {tf::DT_INT16, DDL_INT16},    {tf::DT_UINT16, DDL_UINT16},
    {tf::DT_BOOL, DDL_BOOL},         {tf::DT_UINT8, DDL_UINT8}};

ddl_datatype_t ddl_type(tf::DataType type) {
  return ddl::base::lookup(kDdlTypes, type).value_or(DDL_UINT8);
}

/// Fails the op unless libddl is initialised (ddl.tensorflow initialises it when it builds
/// an op, so this is a graph run in a process that never imported it).
bool joined(tf::OpKernelContext* context) {
  if (ddl_initialized()) return true;
  context->SetStatus(failure<absl::FailedPreconditionError>(
      "ddl: libddl is not initialised in this process: call ddl.init() (or build the graph "
      "with ddl.tensorflow / horovod.tensorflow, which do) and run it under ddlrun"));
  return false;
}

/// The elements per first-axis row of `t` (a scalar is one row of one element).
int64_t per_row(const tf::TensorShape& shape) {
  int64_t n = 1;
  for (int d = 1; d < shape.dims(); ++d)
    n *= shape.dim_size(d);
  return n;
}

/// `shape` with its first dimension replaced by `rows` (a scalar becomes a vector).
tf::TensorShape with_rows(const tf::TensorShape& shape, int64_t rows) {
  tf::TensorShape out;
  out.AddDim(rows);
  for (int d = 1; d < shape.dims(); ++d)
    out.AddDim(shape.dim_size(d));
  return out;
}

/// Output i: input i's values, in the input's buffer when TensorFlow lets it be reused.
absl::Status copy_to_output(tf::OpKernelContext* context, int i, tf::Tensor** out) {
  const tf::Tensor& in = context->input(i);
  TF_RETURN_IF_ERROR(context->forward_input_or_allocate_output({i}, i, in.shape(), out));
  if ((*out)->data() != in.data() && in.TotalBytes() > 0) {
    std::memcpy((*out)->data(), in.data(), in.TotalBytes());
  }
  return absl::OkStatus();
}

/// `shape` as the signatures show it, e.g. "[17,3]"; from dimension `from` on.
std::string shape_text(const tf::TensorShape& shape, int from = 0) {
  std::string text = "[";
  for (int d = from; d < shape.dims(); ++d)
    absl::StrAppend(&text, d > from ? "," : "", shape.dim_size(d));
  return text + "]";
}

/// A dtype as the signatures show it: Python's name (float32, not TensorFlow's "float").
std::string type_name(tf::DataType type) {
  return tf::DataTypeString(type) == "float"    ? "float32"
         : tf::DataTypeString(type) == "double" ? "float64"
         : tf::DataTypeString(type) == "half"   ? "float16"
                                                : tf::DataTypeString(type);
}

/// A reduction (ddl_op_t) as the signatures show it: sum, avg, min, max, prod, band, ...
std::string op_name(int op) {
  constexpr const char* kNames[] = {"sum", "avg", "min", "max", "prod", "band", "bor", "bxor"};
  return op >= 0 && op < 8 ? kNames[op] : absl::StrCat("op ", op);
}

/// An op whose collective is matched across ranks by name (Requests).
class NamedOp : public tf::AsyncOpKernel {
 public:
  explicit NamedOp(tf::OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("ddl_name", &name_));
    OP_REQUIRES_OK(context, context->GetAttr("group", &handle_));
    if (name_.empty()) name_ = name();
  }

 protected:
  /// The libddl group the op runs on (its `group` attr; 0: the whole job).
  ddl_group_t group() const {
    return handle_ == 0 ? ddl_group_world() : reinterpret_cast<ddl_group_t>(handle_);
  }

  /// Files `work` under this op's name and group with `signature` ("kind|field|..."):
  /// Requests.
  void file(tf::OpKernelContext* context, DoneCallback done, std::string signature,
            Requests::Work work) {
    Requests::instance().add(handle_, name_, std::move(signature), context, std::move(done),
                             std::move(work));
  }

 private:
  std::string name_;
  int64_t handle_ = 0;
};

/// DdlAllreduce: op (a ddl_op_t) over every rank's tensors, all in one ddl_allreduce_n.
class AllreduceOp : public NamedOp {
 public:
  explicit AllreduceOp(tf::OpKernelConstruction* context) : NamedOp(context) {
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &op_));
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    std::vector<void*> buffers;
    std::vector<size_t> counts;
    std::string signature =
        absl::StrCat("allreduce|", type_name(context->input(0).dtype()), "|", op_name(op_), "|");
    for (int i = 0; i < context->num_inputs(); ++i) {
      tf::Tensor* out = nullptr;
      OP_REQUIRES_OK_ASYNC(context, copy_to_output(context, i, &out), done);
      absl::StrAppend(&signature, i ? " " : "", shape_text(out->shape()));
      if (out->NumElements() == 0) continue;
      buffers.push_back(out->data());
      counts.push_back(static_cast<size_t>(out->NumElements()));
    }
    const ddl_datatype_t type = ddl_type(context->input(0).dtype());
    const auto op = static_cast<ddl_op_t>(op_);
    file(context, std::move(done), std::move(signature),
         [group = group(), buffers, counts, type, op] {
           if (buffers.empty()) return absl::OkStatus();
           return checked("allreduce", ddl_group_allreduce_n(group, buffers.data(), counts.data(),
                                                             buffers.size(), type, op));
         });
  }

 private:
  int op_ = DDL_SUM;
};

/// DdlBroadcast: root_rank's (a group rank) tensor on every member.
class BroadcastOp : public NamedOp {
 public:
  explicit BroadcastOp(tf::OpKernelConstruction* context) : NamedOp(context) {
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_));
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    const int size = ddl_group_size(group());
    OP_REQUIRES_ASYNC(context, root_ >= 0 && root_ < size,
                      failure<absl::InvalidArgumentError>(
                          "ddl broadcast: root_rank ", root_, " is not a rank of this ",
                          group() == ddl_group_world() ? "job" : "group", " of ", size),
                      done);
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(context, copy_to_output(context, 0, &out), done);
    const int root = root_;
    std::string signature = absl::StrCat("broadcast|", type_name(out->dtype()), "|",
                                         shape_text(out->shape()), "|root ", root);
    file(context, std::move(done), std::move(signature), [group = group(), out, root] {
      if (out->NumElements() == 0) return absl::OkStatus();
      return checked("broadcast",
                     ddl_group_bcast(group, out->data(), static_cast<size_t>(out->NumElements()),
                                     ddl_type(out->dtype()), root));
    });
  }

 private:
  int root_ = 0;
};

/// Element offsets of consecutive blocks of `counts` elements.
std::vector<size_t> offsets_of(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), offsets.begin(), size_t{0});
  return offsets;
}

/// On the worker: allgather of `in` among `group`'s members (its first dimension may differ
/// between them) into a new output 0.
absl::Status allgather(tf::OpKernelContext* context, const tf::Tensor& in, ddl_group_t group) {
  const int size = ddl_group_size(group);
  const int64_t rows = in.dims() == 0 ? 1 : in.dim_size(0);
  const int64_t mine[2] = {rows, per_row(in.shape())};
  std::vector<int64_t> all(2 * static_cast<size_t>(size));
  TF_RETURN_IF_ERROR(
      checked("allgather", ddl_group_allgather(group, mine, all.data(), 2, DDL_INT64)));
  std::vector<size_t> counts(static_cast<size_t>(size));
  int64_t total_rows = 0;
  for (int r = 0; r < size; ++r) {
    if (all[2 * r + 1] != all[1]) {  // the same message on every rank
      return failure<absl::InvalidArgumentError>(
          "ddl allgather: rank ", r, "'s tensor has ", all[2 * r + 1],
          " elements per row of its first dimension, rank 0's has ", all[1],
          ": every dimension but the first must be the same on every rank");
    }
    counts[r] = static_cast<size_t>(all[2 * r] * mine[1]);
    total_rows += all[2 * r];
  }
  tf::Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(0, with_rows(in.shape(), total_rows), &out));
  if (out->NumElements() == 0) return absl::OkStatus();
  return checked(
      "allgather",
      ddl_group_allgatherv(group, in.data(), static_cast<size_t>(in.NumElements()), out->data(),
                           counts.data(), offsets_of(counts).data(), ddl_type(in.dtype())));
}

/// DdlAllgather: every member's tensor, concatenated on the first dimension in rank order.
class AllgatherOp : public NamedOp {
 public:
  using NamedOp::NamedOp;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    const tf::Tensor& in = context->input(0);
    std::string signature =
        absl::StrCat("allgather|", type_name(in.dtype()), "|rows of ", shape_text(in.shape(), 1));
    file(context, std::move(done), std::move(signature),
         [context, group = group()] { return allgather(context, context->input(0), group); });
  }
};

/// The rows `in` sends to each of `size` ranks: `splits` (a vector of size counts adding up
/// to the first dimension), or equal blocks when splits is empty.
absl::Status send_rows(const tf::Tensor& in, const tf::Tensor& splits, int size,
                       std::vector<int64_t>* rows) {
  const int64_t first = in.dims() == 0 ? 1 : in.dim_size(0);
  if (splits.NumElements() == 0) {
    if (first % size != 0) {
      return failure<absl::InvalidArgumentError>("ddl alltoall: the first dimension (", first,
                                                 ") does not divide among ", size,
                                                 " ranks: pass splits");
    }
    rows->assign(static_cast<size_t>(size), first / size);
    return absl::OkStatus();
  }
  if (splits.dims() != 1 || splits.NumElements() != size) {
    return failure<absl::InvalidArgumentError>("ddl alltoall: splits must be a vector of ", size,
                                               " counts (one per rank), not shape ",
                                               splits.shape().DebugString());
  }
  const auto values = splits.flat<int64_t>();
  rows->assign(values.data(), values.data() + size);
  int64_t total = 0;
  for (int64_t n : *rows) {
    if (n < 0)
      return failure<absl::InvalidArgumentError>("ddl alltoall: splits has a negative count");
    total += n;
  }
  if (total != first) {
    return failure<absl::InvalidArgumentError>("ddl alltoall: splits add up to ", total,
                                               ", the first dimension is ", first);
  }
  return absl::OkStatus();
}

/// On the worker: alltoall of `in` among `group`'s members by `rows` (first-dimension rows per
/// member) into outputs 0
/// (what every rank sent here, in rank order) and 1 (the rows from each rank).
absl::Status alltoall(tf::OpKernelContext* context, const tf::Tensor& in,
                      const std::vector<int64_t>& rows, ddl_group_t group) {
  const size_t size = rows.size();
  std::vector<int64_t> received(size);
  TF_RETURN_IF_ERROR(
      checked("alltoall", ddl_group_alltoall(group, rows.data(), received.data(), 1, DDL_INT64)));
  tf::Tensor* splits_out = nullptr;
  TF_RETURN_IF_ERROR(
      context->allocate_output(1, tf::TensorShape({static_cast<int64_t>(size)}), &splits_out));
  const int64_t row = per_row(in.shape());
  std::vector<size_t> send_counts(size), recv_counts(size);
  int64_t total_rows = 0;
  for (size_t r = 0; r < size; ++r) {
    splits_out->flat<int64_t>()(r) = received[r];
    send_counts[r] = static_cast<size_t>(rows[r] * row);
    recv_counts[r] = static_cast<size_t>(received[r] * row);
    total_rows += received[r];
  }
  tf::Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(0, with_rows(in.shape(), total_rows), &out));
  return checked("alltoall", ddl_group_alltoallv(group, in.data(), send_counts.data(),
                                                 offsets_of(send_counts).data(), out->data(),
                                                 recv_counts.data(), offsets_of(recv_counts).data(),
                                                 ddl_type(in.dtype())));
}

/// DdlAlltoall: splits[j] rows of the tensor to rank j (equal blocks without splits); returns
/// what each rank sent here, concatenated in rank order, and how many rows each sent.
class AlltoallOp : public NamedOp {
 public:
  using NamedOp::NamedOp;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    std::vector<int64_t> rows;
    OP_REQUIRES_OK_ASYNC(
        context, send_rows(context->input(0), context->input(1), ddl_group_size(group()), &rows),
        done);
    const tf::Tensor& in = context->input(0);
    std::string signature =
        absl::StrCat("alltoall|", type_name(in.dtype()), "|rows of ", shape_text(in.shape(), 1));
    file(context, std::move(done), std::move(signature), [context, rows, group = group()] {
      return alltoall(context, context->input(0), rows, group);
    });
  }
};

/// Shape function: `input`'s shape with an unknown first dimension.
absl::Status unknown_rows(ShapeContext* c, int output) {
  tf::shape_inference::ShapeHandle out = c->input(0);
  if (c->RankKnown(out)) {
    if (c->Rank(out) == 0) {
      out = c->Vector(c->UnknownDim());
    } else {
      TF_RETURN_IF_ERROR(c->ReplaceDim(out, 0, c->UnknownDim(), &out));
    }
  }
  c->set_output(output, out);
  return absl::OkStatus();
}

constexpr char kTypes[] =
    "T: {float, double, half, bfloat16, int32, int64, uint8, int8, int16, uint16, bool}";

REGISTER_OP("DdlAllreduce")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .Attr(kTypes)
    .Attr("N: int >= 1")
    .Attr("reduce_op: int")
    .Attr("ddl_name: string = ''")
    .Attr("group: int = 0")
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i)
        c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

REGISTER_OP("DdlBroadcast")
    .Input("tensor: T")
    .Output("broadcast: T")
    .Attr(kTypes)
    .Attr("root_rank: int")
    .Attr("ddl_name: string = ''")
    .Attr("group: int = 0")
    .Attr("grad_op: int = 0")
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

REGISTER_OP("DdlAllgather")
    .Input("tensor: T")
    .Output("gathered: T")
    .Attr(kTypes)
    .Attr("ddl_name: string = ''")
    .Attr("group: int = 0")
    .Attr("grad_op: int = 0")
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) { return unknown_rows(c, 0); });

REGISTER_OP("DdlAlltoall")
    .Input("tensor: T")
    .Input("splits: int64")
    .Output("received: T")
    .Output("received_splits: int64")
    .Attr(kTypes)
    .Attr("ddl_name: string = ''")
    .Attr("group: int = 0")
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) {
      c->set_output(1, c->Vector(c->UnknownDim()));
      return unknown_rows(c, 0);
    });

REGISTER_KERNEL_BUILDER(Name("DdlAllreduce").Device(tf::DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("DdlBroadcast").Device(tf::DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("DdlAllgather").Device(tf::DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("DdlAlltoall").Device(tf::DEVICE_CPU), AlltoallOp);

}  // namespace
}  // namespace ddl_tf

// The negotiation thread's side (ddl/tensorflow.py, through ctypes): take the next request
// (blocking), read its name, signature and group (0: the job), then run it or fail it. `code` of a
// failure: 0 FAILED_PRECONDITION (the ranks' calls differ), 1 INVALID_ARGUMENT, 2 UNAVAILABLE, 3
// INTERNAL.
extern "C" {
__attribute__((visibility("default"))) int64_t ddl_tf_next() {
  return ddl_tf::Requests::instance().next();
}
__attribute__((visibility("default"))) const char* ddl_tf_name(int64_t id) {
  return ddl_tf::Requests::instance().name(id);
}
__attribute__((visibility("default"))) const char* ddl_tf_signature(int64_t id) {
  return ddl_tf::Requests::instance().signature(id);
}
__attribute__((visibility("default"))) int64_t ddl_tf_group(int64_t id) {
  return ddl_tf::Requests::instance().group(id);
}
__attribute__((visibility("default"))) void ddl_tf_run(int64_t id) {
  ddl_tf::Requests::instance().finish(id);
}
__attribute__((visibility("default"))) void ddl_tf_fail(int64_t id, int code, const char* message) {
  const absl::Status status = ddl_tf::failure_of(code, message);
  ddl_tf::Requests::instance().finish(id, &status);
}
}
