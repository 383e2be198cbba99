"""Tests of plugins/filter/."""
