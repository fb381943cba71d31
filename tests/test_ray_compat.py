"""Ray's private names, all in bilevel_tune.runtime.ray_compat: each resolves on the installed Ray, and a moved one is a clear error."""

import pytest
import ray

from bilevel_tune.runtime.ray_compat import PRIVATE_NAMES, PrivateName, RayCompatError, resolve


@pytest.mark.parametrize(
    "private",
    [pytest.param(p, marks=[pytest.mark.rllib] if p.module.startswith("ray.rllib") else []) for p in PRIVATE_NAMES],
    ids=lambda p: f"{p.module}.{p.name}",
)
def test_every_private_name_resolves_on_the_installed_ray(private):
    if private.optional:
        try:
            resolve(private)
        except RayCompatError:
            pytest.skip(f"optional on Ray {ray.__version__}: {private.purpose}")
    else:
        assert resolve(private)


def test_a_moved_name_is_one_line_naming_it_the_ray_version_and_the_feature():
    moved = PrivateName("ray._private.utils", "no_such_name", "a feature we need")
    with pytest.raises(RayCompatError) as err:
        resolve(moved)
    assert str(err.value).startswith(
        f"Ray {ray.__version__} moved ray._private.utils.no_such_name, which bilevel_tune needs for a feature we need"
    )
    assert "\n" not in str(err.value)
    gone = PrivateName("ray.tune.tuner", "Tuner.self._no_such_attribute", "resume")
    with pytest.raises(RayCompatError, match="no longer sets self._no_such_attribute"):
        resolve(gone)
