"""The per-update signals the trainer logs for diagnosis, on a hand-computed batch."""

import math

import torch

from npc_brains.diagnose.signals import batch_signals


def test_batch_signals_hand_computed() -> None:
    # 2 ticks x (1 village x 2 agents); agent 1 is dead on the second tick
    alive = torch.tensor([[True, True], [True, False]])
    flat = {  # the three living rows: agent 0 twice, agent 1 once
        "agent": torch.tensor([0, 1, 0]),
        "actions": torch.tensor([2, 0, 1]),
        "mask": torch.tensor([[True, True, True, False], [True, False, False, False], [True, True, False, False]]),
        "returns": torch.tensor([1.0, -3.0, 2.0]),
    }
    adv = torch.tensor([0.5, -1.5, 1.0])
    out = batch_signals(flat, adv, alive, 2)
    assert math.isclose(out["adv_std"], float(adv.std()), rel_tol=1e-6)
    assert out["adv_abs_max"] == 1.5
    assert math.isclose(out["return_abs_mean"], 2.0)
    assert math.isclose(out["valid_actions"], 2.0)  # (3 + 1 + 2) / 3
    assert out["agent_alive"] == [1.0, 0.5]
    # agent 0 chose actions 2 and 1 once each: log 2 nats; agent 1 one action: 0
    assert math.isclose(out["agent_action_entropy"][0], math.log(2), rel_tol=1e-4)
    assert out["agent_action_entropy"][1] == 0.0


def test_agent_without_rows_has_no_entropy() -> None:
    alive = torch.tensor([[True, False]])
    flat = {"agent": torch.tensor([0]), "actions": torch.tensor([1]), "mask": torch.ones(1, 3, dtype=torch.bool),
            "returns": torch.tensor([1.0])}
    out = batch_signals(flat, torch.tensor([0.2]), alive, 2)
    assert out["agent_action_entropy"] == [0.0, None] and out["adv_std"] == 0.0
