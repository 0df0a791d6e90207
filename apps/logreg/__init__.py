"""Encrypted logistic-regression training on MNIST 3 vs 8 (HELR family).

* ``config.HELRConfig``: preset, layout and training settings (JSON round trip).
* ``client.HELRClient``: the secret key, evaluation keys, encryption of the data, decryption.
* ``trainer.EncryptedHELRTrainer``: the server half (keys and ciphertexts only), one Nesterov
  iteration per ``step()``, checkpoints, encrypted scoring; its docstring has the level and key
  account.
* ``dataset.EncryptedDataset``: the encrypted training set as it travels.
* ``twin``, ``schedule``, ``compare``: the plaintext twin, the public mini-batch schedule and the
  plaintext comparison; ``cli`` / ``python -m apps.logreg train``: everything in one process.
"""
