"""horovod.runner.common.util: env (a rank's place from the launcher's variables)."""
