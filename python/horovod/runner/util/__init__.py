"""horovod.runner.util: small helpers of Horovod's runner (threads)."""
