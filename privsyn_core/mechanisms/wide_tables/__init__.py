"""Mechanisms for wide real tables beyond the seed papers: a privately selected tree of 2-D marginals
released as continuous PMM measures (marginal_tree)."""
