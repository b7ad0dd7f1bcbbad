// ddl._tf_ops: TensorFlow ops over libddl (ddl.tensorflow and horovod.tensorflow load it).
//
// How it works: four ops, DdlAllreduce (a list of tensors of one dtype, reduced by one
// ddl_allreduce_n call, which fuses them into large buckets), DdlAllgather (first dimensions
// may differ between ranks), DdlBroadcast and DdlAlltoall (optional splits), each an
// AsyncOpKernel: ComputeAsync checks its inputs, then queues the collective on one worker
// thread per process and returns, so TensorFlow's executor threads never block on the network;
// the worker runs the queued collectives one at a time in the order they were queued and calls
// each op's done callback. The ops are stateful, so inside a tf.function TensorFlow's automatic
// control dependencies run them in program order, the same on every rank (libddl matches calls
// by order). Outputs are new tensors (an input TensorFlow no longer needs is reused in place).
// Shapes that only the peers know (allgather's and alltoall's first dimension) are exchanged
// first with a small ddl_allgather/ddl_alltoall of int64s; then the output is allocated on the
// worker and filled by ddl_allgatherv/ddl_alltoallv. A failed call sets the op's status to the
// runtime's message (ddl_last_error(), read on the worker): FAILED_PRECONDITION when the ranks'
// calls did not match (DDL_ERR_MISMATCH), UNAVAILABLE for a lost peer, INVALID_ARGUMENT for a
// bad argument, INTERNAL otherwise.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

/// The thread that runs every queued collective, in queue order; it lives as long as the
/// process (never joined: a process ends with it waiting on an empty queue).
class Worker {
 public:
  static Worker& instance() {
    static Worker* worker = new Worker;
    return *worker;
  }

  void submit(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

 private:
  Worker() : thread_([this] { run(); }) { thread_.detach(); }

  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty(); });
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;  // last: starts once the members above exist
};

/// The TensorFlow status of a failed libddl call `what`.
absl::Status failure(const std::string& what, ddl_status_t status) {
  std::string message = ddl_last_error();
  if (message.empty()) message = ddl_error_string(status);
  message = "ddl " + what + ": " + message;
  switch (status) {
    case DDL_ERR_MISMATCH:
      return failure<absl::FailedPreconditionError>(message);
    case DDL_ERR_TRANSPORT:
    case DDL_ERR_BOOTSTRAP:
      return failure<absl::UnavailableError>(message);
    case DDL_ERR_ARGUMENT:
      return failure<absl::InvalidArgumentError>(message);
    default:
      return failure<absl::InternalError>(message);
  }
}

/// libddl's code for a TensorFlow dtype (the ops' type constraints allow no other).
ddl_datatype_t ddl_type(tf::DataType type) {
  switch (type) {
    case tf::DT_FLOAT:
      return DDL_FLOAT32;
    case tf::DT_DOUBLE:
      return DDL_FLOAT64;
    case tf::DT_HALF:
      return DDL_FLOAT16;
    case tf::DT_BFLOAT16:
      return DDL_BFLOAT16;
    case tf::DT_INT32:
      return DDL_INT32;
    case tf::DT_INT64:
      return DDL_INT64;
    default:
      return DDL_UINT8;
  }
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

/// DdlAllreduce: op (a ddl_op_t) over every rank's tensors, all in one ddl_allreduce_n.
class AllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit AllreduceOp(tf::OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &op_));
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    std::vector<void*> buffers;
    std::vector<size_t> counts;
    for (int i = 0; i < context->num_inputs(); ++i) {
      tf::Tensor* out = nullptr;
      OP_REQUIRES_OK_ASYNC(context, copy_to_output(context, i, &out), done);
      if (out->NumElements() == 0) continue;
      buffers.push_back(out->data());
      counts.push_back(static_cast<size_t>(out->NumElements()));
    }
    const ddl_datatype_t type = ddl_type(context->input(0).dtype());
    const auto op = static_cast<ddl_op_t>(op_);
    Worker::instance().submit([context, done, buffers, counts, type, op] {
      if (!buffers.empty()) {
        const ddl_status_t status =
            ddl_allreduce_n(buffers.data(), counts.data(), buffers.size(), type, op);
        if (status != DDL_SUCCESS) context->SetStatus(failure("allreduce", status));
      }
      done();
    });
  }

 private:
  int op_ = DDL_SUM;
};

/// DdlBroadcast: root_rank's tensor on every rank.
class BroadcastOp : public tf::AsyncOpKernel {
 public:
  explicit BroadcastOp(tf::OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_));
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    OP_REQUIRES_ASYNC(
        context, root_ >= 0 && root_ < ddl_size(),
        failure<absl::InvalidArgumentError>("ddl broadcast: root_rank ", root_,
                                            " is not a rank of this job of ", ddl_size()),
        done);
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(context, copy_to_output(context, 0, &out), done);
    const int root = root_;
    Worker::instance().submit([context, done, out, root] {
      if (out->NumElements() > 0) {
        const ddl_status_t status = ddl_bcast(out->data(), static_cast<size_t>(out->NumElements()),
                                              ddl_type(out->dtype()), root);
        if (status != DDL_SUCCESS) context->SetStatus(failure("broadcast", status));
      }
      done();
    });
  }

 private:
  int root_ = 0;
};

/// Element offsets of consecutive blocks of `counts` elements.
std::vector<size_t> offsets_of(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size());
  size_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = total;
    total += counts[r];
  }
  return offsets;
}

/// On the worker: allgather of `in` (its first dimension may differ between ranks) into a
/// new output 0.
absl::Status allgather(tf::OpKernelContext* context, const tf::Tensor& in) {
  const int size = ddl_size();
  const int64_t rows = in.dims() == 0 ? 1 : in.dim_size(0);
  const int64_t mine[2] = {rows, per_row(in.shape())};
  std::vector<int64_t> all(2 * static_cast<size_t>(size));
  ddl_status_t status = ddl_allgather(mine, all.data(), 2, DDL_INT64);
  if (status != DDL_SUCCESS) return failure("allgather", status);
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
  status = ddl_allgatherv(in.data(), static_cast<size_t>(in.NumElements()), out->data(),
                          counts.data(), offsets_of(counts).data(), ddl_type(in.dtype()));
  return status == DDL_SUCCESS ? absl::OkStatus() : failure("allgather", status);
}

/// DdlAllgather: every rank's tensor, concatenated on the first dimension in rank order.
class AllgatherOp : public tf::AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    Worker::instance().submit([context, done] {
      context->SetStatus(allgather(context, context->input(0)));
      done();
    });
  }
};

/// The rows `in` sends to each rank: `splits` (a vector of size() counts adding up to the
/// first dimension), or equal blocks when splits is empty.
absl::Status send_rows(const tf::Tensor& in, const tf::Tensor& splits, std::vector<int64_t>* rows) {
  const int size = ddl_size();
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

/// On the worker: alltoall of `in` by `rows` (first-dimension rows per rank) into outputs 0
/// (what every rank sent here, in rank order) and 1 (the rows from each rank).
absl::Status alltoall(tf::OpKernelContext* context, const tf::Tensor& in,
                      const std::vector<int64_t>& rows) {
  const size_t size = rows.size();
  std::vector<int64_t> received(size);
  ddl_status_t status = ddl_alltoall(rows.data(), received.data(), 1, DDL_INT64);
  if (status != DDL_SUCCESS) return failure("alltoall", status);
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
  status = ddl_alltoallv(in.data(), send_counts.data(), offsets_of(send_counts).data(), out->data(),
                         recv_counts.data(), offsets_of(recv_counts).data(), ddl_type(in.dtype()));
  return status == DDL_SUCCESS ? absl::OkStatus() : failure("alltoall", status);
}

/// DdlAlltoall: splits[j] rows of the tensor to rank j (equal blocks without splits); returns
/// what each rank sent here, concatenated in rank order, and how many rows each sent.
class AlltoallOp : public tf::AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    if (!joined(context)) return done();
    std::vector<int64_t> rows;
    OP_REQUIRES_OK_ASYNC(context, send_rows(context->input(0), context->input(1), &rows), done);
    Worker::instance().submit([context, done, rows] {
      context->SetStatus(alltoall(context, context->input(0), rows));
      done();
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

constexpr char kTypes[] = "T: {float, double, half, bfloat16, int32, int64, uint8}";

REGISTER_OP("DdlAllreduce")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .Attr(kTypes)
    .Attr("N: int >= 1")
    .Attr("reduce_op: int")
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
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

REGISTER_OP("DdlAllgather")
    .Input("tensor: T")
    .Output("gathered: T")
    .Attr(kTypes)
    .SetIsStateful()
    .SetShapeFn([](ShapeContext* c) { return unknown_rows(c, 0); });

REGISTER_OP("DdlAlltoall")
    .Input("tensor: T")
    .Input("splits: int64")
    .Output("received: T")
    .Output("received_splits: int64")
    .Attr(kTypes)
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
