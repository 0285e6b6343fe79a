"""Kreačić, Potluru, et al., "Differentially private synthetic data using KD-trees" (UAI 2023):
data-independent binning (kd_grid, Alg. 1, 4-5) and data-dependent KD-tree binning (kd_adaptive, Alg. 2-3)."""
