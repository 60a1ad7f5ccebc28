"""Stored baselines: the history files, the fingerprint, the history judgement (the stored gate) and
``aaco diff``'s judge."""
