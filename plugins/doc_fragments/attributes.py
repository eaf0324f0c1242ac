# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Shared attribute declarations, as community.general does with its `attributes` fragment.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""

    # Modules that only read state.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""

    # Modules that only evaluate data given to them and change nothing on the target.
    EVALUATION_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action only evaluates its input and changes nothing.
  diff_mode:
    support: N/A
    details:
      - This action only evaluates its input and changes nothing.
"""
