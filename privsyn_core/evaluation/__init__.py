"""Judging a release against the real data (teaching only): metrics, utility (TSTR), the privacy audit and
the mechanism guide built from measured runs."""
