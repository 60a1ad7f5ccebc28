"""Stored baselines: the history files, the fingerprint, the environment, and the history judgement."""
