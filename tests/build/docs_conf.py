# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Appended to the conf.py of `antsibull-docs sphinx-init` by `make docs`: a build that needs no network.

The build machines reach no docsite, so no intersphinx inventory is fetched. A reference to another
collection's plugin (``M(kubernetes.core.k8s_info)``, a parameter of it) or to a page of the Ansible
documentation (``common_return_values``) becomes a link to docs.ansible.com; any other unresolved
reference, this collection's own included, stays a warning, and ``sphinx-build -W`` fails on it.
"""

import re as _re

from docutils import nodes as _nodes

intersphinx_mapping = {}

_DOCSITE = "https://docs.ansible.com/ansible/latest"
_OWN = "ansible_collections.gpu_fabric.mnnvl."
_PLUGIN = _re.compile(r"^ansible_collections\.([a-z0-9_]+)\.([a-z0-9_]+)\.([a-z0-9_]+)_([a-z]+)(?:__(.+))?$")
_PAGES = {
    "common_return_values": "reference_appendices/common_return_values.html",
    "ansible_configuration_settings": "reference_appendices/config.html",
    "action_plugins": "plugins/action.html",
}


def _external_url(label):
    if label.startswith(_OWN):
        return None
    match = _PLUGIN.match(label)
    if match:
        namespace, name, plugin, kind, anchor = match.groups()
        url = f"{_DOCSITE}/collections/{namespace}/{name}/{plugin}_{kind}.html"
        return f"{url}#{anchor}" if anchor else url
    page = _PAGES.get(label)
    return f"{_DOCSITE}/{page}" if page else None


def _resolve_external(app, env, node, contnode):
    if node.get("reftype") not in ("ref", "any"):
        return None
    url = _external_url(node.get("reftarget", ""))
    if url is None:
        return None
    reference = _nodes.reference("", "", internal=False, refuri=url)
    reference += contnode
    return reference


def setup(app):
    app.connect("missing-reference", _resolve_external)
