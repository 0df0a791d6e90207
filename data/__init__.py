"""Dataset loaders (MNIST, genomic) and preprocessing."""
