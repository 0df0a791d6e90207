"""Shared checks of the encrypted forest tests (no xgboost needed: the iDASH tests use them too)."""
from apps.xgboost.plan import MARGIN_BITS
from fhe_core.bfv import FLOOD_NOISE_BITS


def check_budgets(client, server, cts, results):
    """Before flooding the measured budget is at least the plan's conservative estimate (which
    leaves the flooding requirement and the margin); the answers sit at the flooding level, switched
    down to the plan's answer level, with at least the plan's answer budget."""
    plan = server.plan
    before = client.noise_budget(server._evaluate_batch(cts[:plan.n_inputs]))
    assert before >= plan.budget_left >= plan.flooding + MARGIN_BITS
    assert all(plan.answer_budget <= client.noise_budget(ct) < FLOOD_NOISE_BITS + 1.5 for ct in results)
    assert all(ct.level == plan.answer_level < plan.level for ct in results)
