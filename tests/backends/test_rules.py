"""Each backend's own rules (backends/rules.py): handed to the spec's validation by the caller,
since the spec sits below the backends (tests/test_imports.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nrl_launch import backends
from nrl_launch.backends import rules
from nrl_launch.spec import LaunchSpec

LOCAL_TWO_NODES = {"backend": "local", "slurm": {"nodes": 2}, "interactive": True}


def test_every_backend_has_its_rules() -> None:
    assert set(rules._RULES) == set(backends._BACKENDS)


def test_the_rules_apply_where_they_are_handed_in() -> None:
    with pytest.raises(ValidationError, match="the local backend runs one node on this machine"):
        LaunchSpec.model_validate(LOCAL_TWO_NODES, context={"backend_rules": rules.check})
    # A spec read back (a job's record) was checked when it was submitted: no rules then.
    assert LaunchSpec.model_validate(LOCAL_TWO_NODES).slurm.nodes == 2


def test_a_backend_without_a_container_says_so_without_loading_its_module() -> None:
    assert [backends.containers(name) for name in ("slurm", "local", "lepton")] == [
        True,
        False,
        True,
    ]


def test_each_backend_s_traits_are_its_own() -> None:
    """backends.traits (known without loading a backend) says what each backend's class says."""
    from nrl_launch import backends

    for name in ("slurm", "local", "lepton"):
        backend, traits = backends.get(name), backends.traits(name)
        assert (backend.slurm_cluster, backend.shares_files, backend.secrets_from_shell) == (
            traits.slurm_cluster,
            traits.shares_files,
            traits.secrets_from_shell,
        ), name
