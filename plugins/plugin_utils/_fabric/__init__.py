"""The fabric gate's pure core (controller only): busbw, transports, floors, pairs, verdict, cache key."""
