"""Boedihardjo, Strohmer, Vershynin, "Covariance's loss is privacy's gain: computationally efficient,
private and accurate synthetic data": k-anonymous and DP Boolean microaggregation (Alg. 1-4)."""
