"""Re-export of the batched policy interface, which lives in engine/ so numpy-only code can use it."""

from engine.policy_api import Policy, PolicyOutput

__all__ = ["Policy", "PolicyOutput"]
