"""horovod.tensorflow.util on libddl: the small helpers scripts and Horovod's tests import from
this module (whether TensorFlow runs eagerly, a cache keyed by the arguments, a function made
into a graph function, variables as hashable references)."""

import functools

import tensorflow as tf

__all__ = ["_executing_eagerly", "_make_subgraph", "_cache", "vars_to_refs", "refs_to_vars"]


def _executing_eagerly():
    """True when TensorFlow runs eagerly here (not while a graph or a tf.function is built)."""
    return tf.executing_eagerly()


def _make_subgraph(f):
    """f as a graph function (tf.function)."""
    return tf.function(f)


def _cache(f):
    """f with its results kept by its (hashable) arguments: called once per argument tuple."""
    cache = {}

    @functools.wraps(f)
    def wrapper(*args):
        if args not in cache:
            cache[args] = f(*args)
        return cache[args]

    return wrapper


def vars_to_refs(variables):
    """Hashable references of variables (tf.Variable is not hashable in TensorFlow 2)."""
    return tuple(v.ref() for v in variables)


def refs_to_vars(refs):
    """The variables of references made by vars_to_refs."""
    return tuple(r.deref() for r in refs)
