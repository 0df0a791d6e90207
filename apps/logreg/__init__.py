"""Encrypted logistic-regression training on MNIST 3 vs 8 (HELR family)."""
