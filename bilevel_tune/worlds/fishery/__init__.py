"""The fishery world: a shared fish stock under surplus production, its fishers and the regulator's rules."""

from bilevel_tune.worlds.fishery.world import RULE_SPECS, Fishery, FisheryObjective, FisherySettings

__all__ = ["RULE_SPECS", "Fishery", "FisheryObjective", "FisherySettings"]
