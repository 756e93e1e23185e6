"""Judging measurements: statistics, grades and fairness. Never starts a process."""
