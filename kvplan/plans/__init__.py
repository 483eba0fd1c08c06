"""Answers composed from the math, one subpackage per capability (DESIGN.md §1)."""
