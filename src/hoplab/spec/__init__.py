"""The lab format: reading, validating and normalising lab files."""

from hoplab.spec.loader import load_lab, load_lab_text

__all__ = ["load_lab", "load_lab_text"]
