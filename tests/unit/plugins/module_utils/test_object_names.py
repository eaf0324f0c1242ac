# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""object_names: the names of a check's objects are DNS-1123 labels that never collide."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label


def test_names_are_dns_labels():
    assert dns_label("Rack_01", "A..B") == "rack-01-a-b"


def test_cut_names_stay_apart():
    long_a = dns_label("gpu-fabric-verify", "nvbandwidth", "clique-69a19a31-32766-and-a-very-long-suffix-a")
    long_b = dns_label("gpu-fabric-verify", "nvbandwidth", "clique-69a19a31-32766-and-a-very-long-suffix-b")
    assert len(long_a) == 63 and len(long_b) == 63 and long_a != long_b
