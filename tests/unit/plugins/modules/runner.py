"""Run a module's ``main()`` in-process, as Ansible would, and hand back its result."""

from __future__ import annotations

from typing import Any, Callable
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class _Exit(Exception):
    """Carries a module result out of ``exit_json``/``fail_json`` instead of ending the process."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs: Any) -> None:
    raise _Exit(dict(kwargs, failed=False))


def _fail_json(self, msg: str, **kwargs: Any) -> None:
    raise _Exit(dict(kwargs, msg=msg, failed=True))


def run_module(
    main: Callable[[], None], args: dict[str, Any], check_mode: bool = False, diff: bool = True
) -> dict[str, Any]:
    """Run ``main`` with ``args`` and return its result; ``failed`` says whether it called fail_json."""
    module_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with (
        patch_module_args(module_args),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json),
    ):
        try:
            main()
        except _Exit as done:
            return done.result
    raise AssertionError("the module returned without exit_json or fail_json")
