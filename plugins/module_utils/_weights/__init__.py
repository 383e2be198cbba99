"""Model weights: staging, manifests, the stat-only check and the page cache."""
