"""horovod.runner.common: the parts of Horovod's runner's common package that programs and test
suites import (util.env)."""
