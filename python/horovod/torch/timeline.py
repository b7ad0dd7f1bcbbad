"""hvd.start_timeline and hvd.stop_timeline (horovod.common.timeline)."""

from ..common import timeline as _timeline
from .mpi_ops import NOT_INITIALIZED, is_initialized


def start_timeline(file_path, mark_cycles=False):
    """Records every collective's negotiation and run into file_path (a Chrome trace written
    by rank 0 at stop_timeline())."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    _timeline.start_timeline(file_path, mark_cycles)


def stop_timeline():
    """Stops the timeline and writes its file."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    _timeline.stop_timeline()
