"""Data-parallel encrypted HELR (apps.logreg.parallel) on two gloo CPU ranks against one process,
bit for bit, at the tiny insecure preset (TINY_N11_HELR, batch 12: 3 ciphertexts per batch, so
the ranks hold uneven shares of 1 and 2; 3 iterations, the third after a bootstrap of the pair).

``run_encrypted_helr(..., nproc=2)`` is what ``python -m apps.logreg train --nproc 2`` runs. With
the same client seed (the same keys and encryptions) the two-rank run must give the single run's
full checkpoint byte for byte (w and v at every level: the ranks' all-reduced sums and replicated
bootstraps are the single device's residues), the same decrypted weights after every iteration,
and the same decrypted margins from the sharded scoring of 9 test ciphertexts (5 and 4 per rank).
"""
import numpy as np
import pytest
import torch

from apps.logreg.cli import build_parser, main, run_encrypted_helr
from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig
from apps.logreg.parallel import shard_dataset, train_data_parallel
from apps.logreg.trainer import HELRTrainingError
from apps.logreg.twin import design_matrix

SAMPLES, TEST_SAMPLES, ITERATIONS, BATCH = 40, 33, 3, 12
SEED = b"apps.logreg.parallel tests".ljust(32, b"\0")  # test-only: fixed keys and encryptions


def test_shards_are_the_contiguous_shares_of_every_block(helr_full):
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=BATCH)
    x = design_matrix(helr_full.x_train[:SAMPLES], helr_full.levels)
    dataset = HELRClient(config, seed=SEED).encrypt_dataset(x, helr_full.y_train[:SAMPLES])
    shards = [shard_dataset(dataset, rank, 2) for rank in range(2)]
    assert [len(s.blocks[0]) for s in shards] == [1, 2]
    for b, block in enumerate(dataset.blocks):
        assert [ct for s in shards for ct in s.blocks[b]] == list(block)
    assert all((s.samples, s.features, s.batch_size, s.n_blocks) ==
               (dataset.samples, dataset.features, dataset.batch_size, dataset.n_blocks) for s in shards)


def test_two_ranks_train_and_score_bit_for_bit_as_one(mnist_dir):
    assert build_parser().parse_args(["train", "--tiny", "--nproc", "2"]).nproc == 2
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=BATCH)
    one, two = (run_encrypted_helr(config, mnist_dir, samples=SAMPLES, progress=False, score=True,
                                   test_samples=TEST_SAMPLES, nproc=nproc, client_seed=SEED) for nproc in (1, 2))
    assert one.checkpoint and two.checkpoint == one.checkpoint
    assert len(one.weights) == len(two.weights) == ITERATIONS
    assert all(np.array_equal(a, b) for a, b in zip(one.weights, two.weights))
    assert one.errors == two.errors and max(one.errors) < 2.0 ** -10  # and both follow the twin
    assert one.bootstraps == two.bootstraps == 1
    assert len(one.margins) == TEST_SAMPLES and np.array_equal(one.margins, two.margins)
    assert (one.encrypted.accuracy, one.encrypted.auroc) == (two.encrypted.accuracy, two.encrypted.auroc)


@pytest.mark.slow
@pytest.mark.parametrize("world", [4, 8])
def test_four_and_eight_ranks_train_bit_for_bit_as_one(mnist_dir, world):
    """Issue 32's rank counts on gloo: batch 32 is 8 ciphertexts, so 8 ranks hold one each."""
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=32)
    one, many = (run_encrypted_helr(config, mnist_dir, samples=SAMPLES, progress=False, nproc=nproc,
                                    client_seed=SEED) for nproc in (1, world))
    assert one.checkpoint and many.checkpoint == one.checkpoint
    assert all(np.array_equal(a, b) for a, b in zip(one.weights, many.weights)) and len(many.weights) == ITERATIONS
    assert one.bootstraps == many.bootstraps == 1


@pytest.mark.parametrize("world", [0, 4])
def test_more_ranks_than_ciphertexts_per_batch_are_refused(world, tmp_path):
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=BATCH)
    with pytest.raises(HELRTrainingError, match=f"{world} ranks for 3 ciphertexts per batch"):
        train_data_parallel(config, tmp_path / "keys.bin", None, config.schedule(SAMPLES), world)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_two_gpus_train_bit_for_bit_as_one(mnist_dir):
    """The same on NCCL: one GPU against two (cuda:0 and cuda:1)."""
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=BATCH)
    one, two = (run_encrypted_helr(config, mnist_dir, device="cuda", samples=SAMPLES, progress=False, score=True,
                                   test_samples=TEST_SAMPLES, nproc=nproc, client_seed=SEED) for nproc in (1, 2))
    assert one.checkpoint and two.checkpoint == one.checkpoint
    assert all(np.array_equal(a, b) for a, b in zip(one.weights, two.weights))
    assert np.array_equal(one.margins, two.margins)


def test_more_ranks_than_gpus_are_refused(tmp_path):
    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has 2 GPUs")
    config = HELRConfig.tiny(iterations=ITERATIONS, batch_size=BATCH)
    with pytest.raises(HELRTrainingError, match="2 ranks need 2 GPUs"):
        train_data_parallel(config, tmp_path / "keys.bin", None, config.schedule(SAMPLES), 2, device="cuda")


def test_the_command_refuses_no_ranks(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--tiny", "--nproc", "0"])
    assert "--nproc must be >= 1, got 0" in capsys.readouterr().err
