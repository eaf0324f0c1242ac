# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The metrics' figures: bandwidth in bytes per second, and each tray's figures of a bandwidth record."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics_figures


def test_bandwidth_is_in_bytes_per_second():
    assert metrics_figures.bytes_per_second(821.45) == 821_450_000_000
    assert metrics_figures.bytes_per_second(None) is None
    assert metrics_figures.bytes_per_second(float("nan")) is None
    assert metrics_figures.bytes_per_second(True) is None


def test_tray_figures_of_a_bisect_matrix_follow_its_row_pairs():
    details = {
        "gpus_per_node": 2,
        "matrix": [[700.0], [800.0], [None], [810.0]],
        "row_pairs": [[0, 2], [1, 3], [2, 0], [3, 1]],
    }
    assert metrics_figures.matrix_pairs(details) == [(0, 2, 700.0), (1, 3, 800.0), (3, 1, 810.0)]
    figures = {"min": 700.0, "median": 800.0, "weakest_gpu": 700.0}  # GPU 0 and 2 share the 700 pair
    assert metrics_figures.tray_bandwidth({"nodes": ["t0", "t1"], "details": details}) == {"t0": figures, "t1": figures}


def test_tray_figures_of_a_square_matrix_leave_out_its_diagonal():
    record = {
        "nodes": ["t0", "t1"],
        "details": {"gpus_per_node": 1, "matrix": [[None, 500.0], [700.0, 9999.0]]},
    }
    figures = {"min": 500.0, "median": 600.0, "weakest_gpu": 600.0}  # each GPU's median of its two pairs: 600
    assert metrics_figures.tray_bandwidth(record) == {"t0": figures, "t1": figures}
