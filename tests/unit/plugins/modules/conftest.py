"""Shared setup for tests that run modules in-process."""

from __future__ import annotations

import pytest
from ansible.module_utils import _internal


@pytest.fixture(autouse=True)
def _run_as_on_a_target(monkeypatch):
    """Run modules as they run on a managed host.

    Importing controller code (the filter tests do, through ``ansible.errors``) flags the whole
    interpreter as the controller, and from then on ``module.warn()`` goes to the controller's
    display instead of the module result. Modules never run that way, so their tests must not.
    """
    monkeypatch.setattr(_internal, "is_controller", False)
