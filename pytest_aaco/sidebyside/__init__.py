"""Side by side: the git revision, the cycles, the per-item gate, and the worker in another Python."""
