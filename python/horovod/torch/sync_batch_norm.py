"""hvd.SyncBatchNorm: batch normalisation over the whole job's batch, on CPU tensors.

How it works: in training, each rank sums its input per channel (count, sum, sum of squares,
in float64) and one allreduce gives the job's mean and biased variance, which normalise every
rank's input; the running statistics take the unbiased variance of the job's batch, as one
BatchNorm over the concatenated batch would. Backward allreduces the per-channel sums of dy and
dy * x_hat and gives each rank the input gradient of the job's normalisation; the weight and
bias gradients stay local, for DistributedOptimizer to average. Outside training, or in a job
of one rank, it is torch's BatchNorm.
"""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from .mpi_ops import Sum, allreduce_, size


def _channel_shape(x):
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _channel_sums(x, dims):
    return torch.cat([x.sum(dims), (x * x).sum(dims)]).to(torch.float64)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum):
        x = x.contiguous()
        channels, dims = x.shape[1], [0] + list(range(2, x.dim()))
        stats = torch.cat([torch.tensor([x.numel() // channels], dtype=torch.float64),
                           _channel_sums(x, dims)])
        allreduce_(stats, op=Sum)
        count = stats[0].item()
        mean = stats[1:1 + channels] / count
        var = (stats[1 + channels:] / count - mean * mean).clamp_(min=0)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
            unbiased = var * count / max(count - 1, 1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        invstd = (var + eps).rsqrt().to(x.dtype)
        shape = _channel_shape(x)
        xhat = (x - mean.to(x.dtype).view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.count = count
        if weight is None:
            return xhat
        return xhat * weight.view(shape) + bias.view(shape)

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd = ctx.saved_tensors
        dy = dy.contiguous()
        channels, dims, shape = dy.shape[1], [0] + list(range(2, dy.dim())), _channel_shape(dy)
        sum_dy, sum_dy_xhat = dy.sum(dims), (dy * xhat).sum(dims)
        both = torch.cat([sum_dy, sum_dy_xhat]).to(torch.float64)
        allreduce_(both, op=Sum)
        mean_dy = (both[:channels] / ctx.count).to(dy.dtype)
        mean_dy_xhat = (both[channels:] / ctx.count).to(dy.dtype)
        scale = invstd if weight is None else invstd * weight
        dx = (dy - mean_dy.view(shape) - xhat * mean_dy_xhat.view(shape)) * scale.view(shape)
        if weight is None:
            return dx, None, None, None, None, None, None
        return dx, sum_dy_xhat, sum_dy, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training statistics are those of every rank's batch together
    (torchvision: resnet50(norm_layer=hvd.SyncBatchNorm))."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        if not self.training or size() == 1:
            return super().forward(input)
        self._check_input_dim(input)
        momentum = self.momentum or 0.0
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, self.running_mean,
                                            self.running_var, self.eps, momentum)
