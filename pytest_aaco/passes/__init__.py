"""Extra passes after the measured rounds: cold start, operator profile, kernel traces (CUPTI, rocprof)."""
