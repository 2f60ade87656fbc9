"""Submitted jobs: their records on disk, and how their state is read back."""
