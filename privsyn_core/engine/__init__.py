"""How a release runs: the shared pipeline below ``api`` (pipeline) and the Dask backend (dask_backend), both
calling a mechanism's declarations (:mod:`privsyn_core.mechanisms.base`)."""
