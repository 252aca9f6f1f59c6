"""Stands in for upstream CleanRL's helper package (the scripts here import nothing of it)."""
