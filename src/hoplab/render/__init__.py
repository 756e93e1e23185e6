"""Turning stored runs into something a person reads: terminal tables, plots, reports."""
