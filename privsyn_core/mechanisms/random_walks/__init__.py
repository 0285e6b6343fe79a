"""Boedihardjo, Strohmer, Vershynin, "Private measures, random walks, and synthetic data":
superregular random walks (srw) and the TSP folding of the cube onto a path (srw_tsp)."""
