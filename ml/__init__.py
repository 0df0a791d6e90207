"""Encrypted-ML building blocks: packing, polynomial approximations, encrypted linear algebra,
plaintext baselines and metrics."""
