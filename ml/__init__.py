"""Encrypted-ML building blocks: packing, polynomial approximations, encrypted linear algebra,
plaintext baselines and metrics.

Layers: fhe_core -> data -> ml -> apps -> server (each imports only those before it). ml imports
fhe_core (today only its errors: the encrypted helpers take any evaluator) and never data, apps or
server."""
