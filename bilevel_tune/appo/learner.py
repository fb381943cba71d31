"""PopulationAPPOLearner: RLlib's APPO learner, run on a population module as if on N separate ones.

APPO's loss (`APPOTorchLearner.compute_loss_for_module`: V-trace, clipped
surrogate, value and entropy terms, the target network's IS ratio) is
unchanged; two things make one stacked update equal to N independent ones:

* **Summed, not averaged.** RLlib's loss is a mean over the module's rows.
  Every candidate has the same number of unmasked rows (`batch.py`), so the
  mean over all of them is (1/N)·Σ_k mean_k: times N it is the sum of the
  candidates' own losses, and candidate k's parameters get exactly the
  gradient of its own loss.
* **Clipped per candidate.** RLlib clips one global norm per module; here
  each candidate's slice of every gradient is clipped by that candidate's
  own global norm, with RLlib's formula.

Adam is elementwise, so one Adam over the stacked parameters is N Adams;
the target network update is elementwise too. Settings that would couple
candidates are refused when the loop is configured (`settings.py`).
"""

from __future__ import annotations

import torch
from ray.rllib.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner

GRADIENT_NORM = "gradients_candidate_global_norm"  # per module: the mean of the candidates' norms before clipping
CLIPPED = "gradients_candidates_clipped"  # per module: how many candidates' gradients were clipped


class ClippedPerCandidate:
    """A population learner's gradient clip: each candidate's slice by its own global norm (`clip_per_candidate`)."""

    def postprocess_gradients_for_module(self, *, module_id, config=None, module_gradients_dict):
        if not config.grad_clip:
            return dict(module_gradients_dict)
        norms = clip_per_candidate(list(module_gradients_dict.values()), config.grad_clip)
        self.metrics.log_value((module_id, GRADIENT_NORM), float(norms.mean()), window=1)
        self.metrics.log_value((module_id, CLIPPED), int((norms + 1e-6 > config.grad_clip).sum()), window=1)
        return dict(module_gradients_dict)


class PopulationAPPOLearner(ClippedPerCandidate, APPOTorchLearner):
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        population = self.module[module_id].unwrapped().population
        return population * super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )


def clip_per_candidate(gradients: list[torch.Tensor | None], grad_clip: float) -> torch.Tensor:
    """Scale each candidate's slice (dim 0) of every gradient by RLlib's global-norm rule for that slice alone.

    RLlib (`torch_utils.clip_gradients`, "global_norm"): norm = ‖(‖g‖ for g)‖,
    coefficient = min(1, grad_clip / max(norm + 1e-6, grad_clip)). In place;
    returns the candidates' norms.
    """
    present = [g for g in gradients if g is not None]
    per_tensor = torch.stack(
        [
            torch.linalg.vector_norm(g.detach().reshape(g.shape[0], -1), 2, dim=1).nan_to_num(neginf=-10e8, posinf=10e8)
            for g in present
        ]
    )  # [tensors, N]
    norms = torch.linalg.vector_norm(per_tensor, 2, dim=0).nan_to_num(neginf=-10e8, posinf=10e8)
    coefficient = torch.clamp(grad_clip / torch.clamp(norms + 1e-6, min=grad_clip), max=1.0)
    for g in present:
        g.detach().mul_(coefficient.reshape(-1, *([1] * (g.dim() - 1))))
    return norms
