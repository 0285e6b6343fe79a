"""User-facing errors.

Every problem a user can fix (bad file, bad column, bad parameter) raises a subclass of
:class:`PrivsynError`, whose message is one line that names the problem and says what to
change.  The CLI turns these into exit status 2, the app into an error box.
"""


class PrivsynError(ValueError):
    """A problem with the user's input, explained in one line."""


class DataError(PrivsynError):
    """The table cannot be used as given (empty, NaN, text in a numeric column, ...)."""


class SchemaError(PrivsynError):
    """The public domain is malformed (lo >= hi, unknown column, empty category list, ...)."""


class ResourceError(PrivsynError):
    """A run would exceed the memory budget (:mod:`privsyn_core.mechanisms.base.resources`); the message says what
    to change."""


class ClusterError(PrivsynError):
    """A Dask run cannot go on: the cluster has no worker (``PRIVSYN_DASK_WORKER_TIMEOUT``)."""


class ParameterError(PrivsynError):
    """A mechanism parameter, epsilon or the neighbouring relation is out of range."""


class OutputError(PrivsynError):
    """An output file cannot be written as asked (it is an input, exists without ``--force``, no space, ...)."""
