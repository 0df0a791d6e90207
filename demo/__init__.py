"""The main job: the product's three user jobs end to end, against plaintext baselines.

``python -m demo`` (what ``bash scripts/quickstart.sh demo`` runs) starts the HTTP service on a
loopback port and then acts as its users:

1. a lab registers an XGBoost model trained on SRBCT tumour profiles in the model-private
   encoding (the clinic learns only the grid and public bounds; ``--srbct-encodings`` adds the
   thermometer encoding for comparison) and the iDASH 2020 model when its files are given; a
   clinic generates keys, registers the evaluation keys and its public key, sends encrypted
   profiles, decrypts the (flooded) encrypted class scores and compares them with plaintext
   XGBoost and the exact integer twin;
2. a data owner uploads the encrypted MNIST 3-vs-8 training set, submits an encrypted HELR
   training job, follows it, downloads and decrypts the model after every iteration and
   compares it with the plaintext twin (same schedule) and scikit-learn;
3. the server is stopped and a report (Markdown, PNG plots, JSON numbers) is written.

This package sits above ``server`` (it uses the typed client and starts the service) and the
apps; nothing imports it. Secret keys live in this process only; the server runs in another.
"""
