"""He, Vershynin, Zhu, "Algorithmically effective differentially private synthetic data" (COLT 2023):
the Private Measure Mechanism (pmm, Alg. 3-4) and the Private Signed Measure Mechanism (psmm, Alg. 1-2), with
their binary tree and linear-program helpers."""
