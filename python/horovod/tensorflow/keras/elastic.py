"""horovod.tensorflow.keras.elastic on libddl: KerasState and run (see horovod.tensorflow.elastic
for what elastic means under ddlrun)."""

from ..elastic import ObjectState, run  # noqa: F401
from ..elastic import TensorFlowKerasState as KerasState

__all__ = ["KerasState", "ObjectState", "run"]
