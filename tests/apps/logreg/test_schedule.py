"""Mini-batch schedule: a seeded partition of the rows, replayable from its saved form."""
import numpy as np
import pytest

from apps.logreg.config import HELRConfig
from apps.logreg.schedule import MiniBatchSchedule


@pytest.mark.parametrize("order", ["cycle", "shuffle"])
def test_blocks_partition_the_rows(order):
    schedule = MiniBatchSchedule.build(11982, 1024, 30, seed=4, order=order)
    assert schedule.n_blocks == 12 and schedule.iterations == 30
    rows = np.concatenate([schedule.block_rows(b) for b in range(schedule.n_blocks)])
    assert sorted(rows.tolist()) == list(range(11982))
    assert [len(schedule.block_rows(b)) for b in (0, 11)] == [1024, 11982 - 11 * 1024]
    for epoch in range(2):  # every epoch visits every block once
        visited = schedule.block_order[epoch * 12 : (epoch + 1) * 12]
        assert sorted(visited.tolist()) == list(range(12))
    if order == "cycle":
        assert schedule.block_order.tolist() == [t % 12 for t in range(30)]


def test_seed_determinism_and_difference():
    a, b, c = (MiniBatchSchedule.build(500, 64, 10, seed=s, order="shuffle") for s in (1, 1, 2))
    np.testing.assert_array_equal(a.permutation, b.permutation)
    np.testing.assert_array_equal(a.block_order, b.block_order)
    assert not np.array_equal(a.permutation, c.permutation)


def test_npz_roundtrip(tmp_path):
    schedule = MiniBatchSchedule.build(300, 32, 17, seed=9, order="shuffle")
    schedule.to_npz(tmp_path / "s.npz")
    loaded = MiniBatchSchedule.from_npz(tmp_path / "s.npz")
    assert loaded.batch_size == 32
    for t in range(17):
        np.testing.assert_array_equal(loaded.rows_at(t), schedule.rows_at(t))


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        MiniBatchSchedule.build(10, 0, 3)
    with pytest.raises(ValueError, match="order"):
        MiniBatchSchedule.build(10, 2, 3, order="random")


@pytest.mark.parametrize("samples", [1, 15, 16, 17, 300])
def test_config_counts_blocks_as_the_schedule_does(samples):
    config = HELRConfig.tiny(iterations=3)  # batch 16
    assert config.n_blocks(samples) == config.schedule(samples).n_blocks
