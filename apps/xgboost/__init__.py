"""Encrypted XGBoost inference for tumour-type classification from genomic data."""
