"""The public domain and the data around it: the schema (domain), codecs, CSV/schema I/O, bundled datasets,
grids, the non-collapsing layout rules and DP bounds."""
