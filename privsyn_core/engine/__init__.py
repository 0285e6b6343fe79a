"""How a release runs: the staged protocol (staged), the shared pipeline below ``api`` (pipeline), the memory
budget (resources) and the Dask backend."""
