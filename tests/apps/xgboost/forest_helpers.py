"""Shared checks of the encrypted forest tests (no xgboost needed: the iDASH tests use them too)."""
from apps.xgboost.plan import MARGIN_BITS
from fhe_core.bfv import FLOOD_NOISE_BITS


def check_budgets(client, server, cts, results):
    """Before flooding the measured budget is at least the plan's conservative estimate (which
    leaves the flooding requirement and the margin); the answers sit at the flooding level, at level 0."""
    plan = server.plan
    before = client.noise_budget(server._evaluate_batch(cts[:plan.n_inputs]))
    assert before >= plan.budget_left >= plan.flooding + MARGIN_BITS
    assert all(FLOOD_NOISE_BITS <= client.noise_budget(ct) < FLOOD_NOISE_BITS + 1.5 and ct.level == 0
               for ct in results)
