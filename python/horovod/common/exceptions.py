"""Horovod's exception types, shared by every framework's API."""


class HorovodInternalError(RuntimeError):
    """A collective failed in a way that leaves this rank unable to go on with the job (the
    communicator broke: a rank died, the network failed). Elastic training restarts on it."""


class HostsUpdatedInterrupt(RuntimeError):
    """The job's hosts changed (elastic training): the training loop should re-synchronise.
    ddlrun restarts jobs instead (--max-restarts), so nothing on libddl raises it."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts were updated")
        self.skip_sync = skip_sync
