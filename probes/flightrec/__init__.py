"""Placeholder; being built."""
