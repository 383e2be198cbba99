"""Ranks at run time: their logs, failure signatures, probes, the lane's progress and verdict."""
