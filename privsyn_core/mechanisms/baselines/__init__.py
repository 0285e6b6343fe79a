"""Baselines and references: Laplace noise on points, a flat DP histogram, and the (non-private) bootstrap."""
