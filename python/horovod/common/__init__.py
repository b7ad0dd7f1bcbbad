"""horovod.common: what horovod.torch and horovod.tensorflow share on libddl (basics), as
Horovod's own horovod.common does."""
