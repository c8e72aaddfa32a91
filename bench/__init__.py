"""Benchmarks a user can run; see README."""
