"""Privacy primitives: the epsilon ledger (accounting), exact noise samplers (noise), secure sampling helpers,
histogram sensitivity per neighbouring relation (sensitivity)."""
