"""horovod: Horovod's PyTorch API (horovod.torch) on libddl, for Horovod scripts run unchanged
under ddlrun.

This package is found only through the directory ddlrun puts on the ranks' PYTHONPATH (beside
the package ddl), so it stands in for Horovod where Horovod is not installed, and a real Horovod
stays in charge where it is. What it holds: horovod.torch (the API of Horovod 0.28's
horovod.torch on CPU tensors: see that module); TensorFlow, Keras and MXNet are not provided.
"""

__version__ = "0.28.1+ddl"
