"""What a person reads: Plotly figure builders (pure functions) and the run / HTML reports."""
