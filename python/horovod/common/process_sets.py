"""Horovod's process sets on libddl groups.

How it works: a ProcessSet is a sorted list of job ranks. add_process_set(ranks), called by
every rank with the same ranks (as Horovod's dynamic process sets ask), gives the set the next
id and, on its members, a ddl.Group (ddl.new_group: nothing is sent; members whose lists differ
fail the set's first collective), which the set's collectives hand to ddl._negotiate as their
group: they are matched by name among the members only, and run on the members only.
remove_process_set destroys the group. The global set (id 0) is the whole job, group None.
hvd.shutdown() removes every set but the global one.
"""

import ddl

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set"]


class ProcessSet:
    """Some ranks of the job: ProcessSet([0, 2]). Registered by add_process_set (or
    hvd.init(process_sets=[...])), it has a process_set_id and works as process_set= of every
    collective."""

    def __init__(self, ranks):
        if not hasattr(ranks, "__iter__"):
            raise ValueError(f"ProcessSet: ranks must be a list of ranks, not {ranks!r} (an MPI "
                             "communicator is not taken on libddl)")
        self._ranks = sorted({int(r) for r in ranks})
        self.process_set_id = None
        self.group = None  # the ddl.Group on members once registered; None for the global set

    @property
    def ranks(self):
        return self._ranks

    def size(self):
        """The number of ranks in the set (None while not registered)."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This rank's index in the set (None while not registered; -1 outside it)."""
        if self.process_set_id is None:
            return None
        me = ddl.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """True when this rank is a member (None while not registered)."""
        return None if self.process_set_id is None else ddl.rank() in self.ranks

    def __repr__(self):
        if self is global_process_set:
            return "global_process_set"
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job (id 0)."""

    def __init__(self):
        super().__init__([])
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(ddl.size())) if ddl.initialized() else []


global_process_set = _GlobalProcessSet()
_registered = {0: global_process_set}  # id -> ProcessSet
_next_id = [1]


def add_process_sets(process_sets):
    """Registers each of process_sets (hvd.init(process_sets=...)); ValueError, with none
    registered, when two of them, or one and a registered set, have the same ranks."""
    sets = [ps if isinstance(ps, ProcessSet) else ProcessSet(ps) for ps in process_sets]
    seen = {tuple(p.ranks) for p in _registered.values()}
    for ps in sets:
        if tuple(ps.ranks) in seen:
            raise ValueError(f"hvd.init: process sets of ranks {ps.ranks} are given twice (or "
                             "one exists already): give each set of ranks once")
        seen.add(tuple(ps.ranks))
    return [add_process_set(ps) for ps in sets]


def ids_and_ranks():
    """{id: ranks} of every registered set."""
    return {i: list(ps.ranks) for i, ps in sorted(_registered.items())}


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) on every rank and returns it; every rank of
    the job calls it with the same ranks. ValueError for a set of these ranks that exists."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    size = ddl.size()
    if not ps.ranks or ps.ranks[0] < 0 or ps.ranks[-1] >= size:
        raise ValueError(f"add_process_set: ranks {ps.ranks} must be ranks of this job "
                         f"(0..{size - 1}), at least one")
    for other in _registered.values():
        if other.ranks == ps.ranks:
            raise ValueError(f"add_process_set: a process set of ranks {ps.ranks} exists "
                             f"already (id {other.process_set_id}); use that one")
    if ps.process_set_id is not None:
        raise ValueError(f"add_process_set: {ps!r} is registered already")
    ps.group = ddl.new_group(ps.ranks)
    ps.process_set_id = _next_id[0]
    _next_id[0] += 1
    _registered[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set):
    """Unregisters a set added by add_process_set (every rank calls it); False when it was not
    registered. The global set cannot be removed."""
    if process_set is global_process_set:
        raise ValueError("remove_process_set: the global process set cannot be removed")
    if _registered.get(process_set.process_set_id) is not process_set:
        return False
    del _registered[process_set.process_set_id]
    if process_set.group is not None:
        process_set.group.destroy()
    process_set.group, process_set.process_set_id = None, None
    return True


def outside(process_set):
    """True when process_set is registered and this rank is not one of its members."""
    registered = _registered.get(getattr(process_set, "process_set_id", None)) is process_set
    return registered and process_set is not global_process_set and process_set.group is None


def group_of(process_set, what):
    """The ddl group (None: the job) of a registered set this rank belongs to; ValueError
    naming `what` (the call) otherwise."""
    if process_set is global_process_set:
        return None
    if not isinstance(process_set, ProcessSet):
        raise ValueError(f"hvd.{what}: process_set must be a ProcessSet (hvd.global_process_set "
                         f"or one from hvd.add_process_set), not {type(process_set).__name__}")
    if _registered.get(process_set.process_set_id) is not process_set:
        raise ValueError(f"hvd.{what}: process_set {process_set!r} is not registered: "
                         "add it with hvd.add_process_set(ranks) first")
    if process_set.group is None:
        raise ValueError(f"hvd.{what}: this rank ({ddl.rank()}) is not in {process_set!r}: "
                         "call it on the set's members only")
    return process_set.group


def root_of(root_rank, process_set, what):
    """The group rank of job rank root_rank in process_set; ValueError when it is not in it."""
    ranks = process_set.ranks
    if process_set is global_process_set and root_rank not in ranks:
        raise ValueError(f"hvd.{what}: root_rank {root_rank} is not a rank of this job "
                         f"(0..{len(ranks) - 1})")
    if root_rank not in ranks:
        raise ValueError(f"hvd.{what}: root_rank {root_rank} is not a rank of {process_set!r} "
                         f"(ranks {ranks})")
    return ranks.index(root_rank)


def by_id(process_set_id, what):
    """The registered set of that id; ValueError naming `what` otherwise."""
    ps = _registered.get(int(process_set_id))
    if ps is None:
        raise ValueError(f"hvd.{what}: no process set has id {process_set_id}: add it with "
                         "hvd.add_process_set(ranks) first")
    return ps


def reset():
    """Removes every set but the global one (hvd.shutdown())."""
    for ps in [p for i, p in _registered.items() if i != 0]:
        remove_process_set(ps)
    _next_id[0] = 1
