"""horovod.runner: what Horovod's runner package offers to training code and test suites on
libddl. Jobs are started by ddlrun (not horovodrun), so only the helpers that programs import
are here: horovod.runner.util.threads and horovod.runner.common.util.env."""
