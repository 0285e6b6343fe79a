"""Peer benchmark (``python -m benchmarks.peers.driver``).  The ``run_*.py`` children are run as files by the
peers' own interpreter and import their sibling ``common`` directly."""
