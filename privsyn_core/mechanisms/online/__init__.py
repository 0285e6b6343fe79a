"""Continual-release mechanisms: one epsilon for a whole stream of batches (:mod:`.online_pmm`)."""
