"""horovod.keras on libddl: Horovod's standalone-Keras spelling (`import horovod.keras as hvd`),
the same API as horovod.tensorflow.keras, on tf.keras (Keras 3, or tf-keras under
TF_USE_LEGACY_KERAS=1)."""

from ..tensorflow.keras import *  # noqa: F403 (the same API under Horovod's other name)
from ..tensorflow.keras import (PartialDistributedOptimizer, __all__, callbacks,  # noqa: F401
                                elastic)
