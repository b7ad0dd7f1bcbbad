"""horovod: Horovod's PyTorch API (horovod.torch) on libddl, for Horovod scripts run unchanged
under ddlrun.

The build and `cmake --install` put this package into ddl/_horovod/, a directory no interpreter
searches unless it is put on its path, as ddlrun does for its ranks, so it stands in for Horovod
where Horovod is not installed and a real Horovod stays in charge where it is. What it holds:
horovod.torch (the API of Horovod 0.28's horovod.torch on CPU tensors: see that module),
horovod.tensorflow and horovod.tensorflow.keras (Horovod's TensorFlow 2 API, for Keras 3: see
those modules), horovod.common (what they share: the controller that matches calls by name,
process sets, the timeline), horovod.runner.util (helpers programs import); MXNet is not
provided.
"""

__version__ = "0.28.1+ddl"
