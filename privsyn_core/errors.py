"""Every error the library raises on purpose, in one hierarchy.

Each message is one line that names the problem and says what to change; the CLI turns a
:class:`PrivsynError` into exit status 2, the app into an error box.  The hierarchy separates what the caller
can fix in its own input from the states of the system around a release::

    PrivsynError
    ├── InputError (also a ValueError)   the data, the schema, a parameter or the command line
    │   ├── DataError
    │   ├── SchemaError
    │   ├── ParameterError
    │   └── UsageError
    ├── ResourceError                    the run would not fit the memory budget
    ├── OutputError                      an output file cannot be written as asked
    ├── BudgetExceeded                   the dataset's privacy budget does not cover the release
    ├── LedgerError                      the privacy ledger cannot be trusted: releases are refused
    ├── StreamError                      a stream's state cannot be used as asked
    └── ClusterError                     a Dask cluster cannot run the release
"""

__all__ = ["PrivsynError", "InputError", "DataError", "SchemaError", "ParameterError", "UsageError",
           "ResourceError", "OutputError", "BudgetExceeded", "LedgerError", "StreamError", "ClusterError"]


class PrivsynError(Exception):
    """A problem the library explains in one line (the base of every error it raises on purpose)."""


class InputError(PrivsynError, ValueError):
    """The caller's input is malformed or out of range; fixing the input fixes the call."""


class DataError(InputError):
    """The table cannot be used as given (empty, NaN, text in a numeric column, ...)."""


class SchemaError(InputError):
    """The public domain is malformed (lo >= hi, unknown column, empty category list, ...)."""


class ParameterError(InputError):
    """A mechanism parameter, epsilon or the neighbouring relation is out of range."""


class UsageError(InputError):
    """A malformed command line (unknown option, missing argument, a value of the wrong type)."""


class ResourceError(PrivsynError):
    """A run would exceed the memory budget (:mod:`privsyn_core.mechanisms.base.resources`); the message says what
    to change."""


class OutputError(PrivsynError):
    """An output file cannot be written as asked (it is an input, exists without ``--force``, no space, ...)."""


class BudgetExceeded(PrivsynError):
    """A release would take the private spends on a dataset above its budget (or no budget is set where one is
    required)."""


class LedgerError(PrivsynError):
    """The ledger cannot be trusted (missing after it existed, empty, damaged): every release is refused."""


class StreamError(PrivsynError):
    """A stream's state cannot be used as asked (missing, corrupted, busy, of another schema or epsilon)."""


class ClusterError(PrivsynError):
    """A Dask run cannot go on: the cluster has no worker (``PRIVSYN_DASK_WORKER_TIMEOUT``)."""
