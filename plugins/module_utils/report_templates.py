# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Jinja2 templates of the verification report (Markdown and HTML).

They live in a Python module because AnsiballZ ships only the Python ``module_utils`` a module
imports; a ``templates/`` file of the collection would not reach the host the module runs on.

The templates only loop and test: every text, count, CSS class, colour and tooltip comes ready
from ``report_page.report_view``; the trend charts come as SVG made by ``report_chart`` (escaped there), which
the HTML template marks ``safe``. The Markdown environment escapes each ``{{ value }}`` for Markdown
(pipes, tags, line breaks); the HTML environment autoescapes.
"""

from __future__ import annotations

MARKDOWN_TEMPLATE = """\
# {{ title }}

**{{ verdict }}**: {{ verdict_words }}.
{% if facts %}

{% for fact in facts %}
- {{ fact.label }}: {{ fact.text }}
{% endfor %}
{% endif %}
{% if fleet_rows %}

| rack |{% for column in columns %} {{ column }} |{% endfor %} trays verified |
| --- |{% for column in columns %} --- |{% endfor %} --- |
{% for row in fleet_rows %}
| {{ row.rack }} |{% for cell in row.cells %} {{ cell.text }} |{% endfor %} {{ row.trays }} |
{% endfor %}
{% endif %}
{% if trends %}

## Trend of the kept runs

| check | rack | runs | median of the medians (GB/s) | lowest pair (GB/s) | this run's median (GB/s) | \
baseline median (GB/s) | drop | medians, oldest first |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
{% for row in trends %}
| {{ row.check }} | {{ row.rack }} | {{ row.runs }} | {{ row.median }} | {{ row.min }} | {{ row.latest }} | \
{{ row.baseline }} | {{ row.drop }} | {{ row.spark }} |
{% endfor %}
{% if tray_drops %}

Trays whose lowest pair (the lowest GB/s of a GPU pair with a GPU of the tray at either end) dropped below their \
figure in the baseline run:

| check | rack | tray | runs | this run's lowest pair (GB/s) | baseline (GB/s) | drop | lowest pairs, oldest first |
| --- | --- | --- | --- | --- | --- | --- | --- |
{% for tray in tray_drops %}
| {{ tray.check }} | {{ tray.rack }} | {{ tray.node }} | {{ tray.runs }} | {{ tray.latest }} | {{ tray.baseline }} | \
{{ tray.drop }} | {{ tray.spark }} |
{% endfor %}
{% elif tray_trends %}

No tray's lowest pair dropped below its figure in the baseline run beyond the tolerance.
{% endif %}
{% endif %}
{% for rack in racks %}

## {{ rack.rack }}

{{ rack.headline }}
{% for section in rack.sections %}

### {{ section.check }}: {{ section.result }}

{{ section.summary }}
{% if section.facts %}

{% for fact in section.facts %}
{% if fact.code %}
- {{ fact.label }}: `{{ fact.text }}`
{% else %}
- {{ fact.label }}: {{ fact.text }}
{% endif %}
{% endfor %}
{% endif %}
{% if section.blamed %}

| tray | problem |
| --- | --- |
{% for tray in section.blamed %}
| {{ tray.node }} | {{ tray.problem }} |
{% endfor %}
{% endif %}
{% if section.violations %}

Problems found:

{% for violation in section.violations %}
- {{ violation }}
{% endfor %}
{% if section.more_violations %}
- {{ section.more_violations }}
{% endif %}
{% endif %}
{% for table in section.tables %}
{% if table.rows %}

{% if table.title %}
{{ table.title }}

{% endif %}
|{% for column in table.columns %} {{ column }} |{% endfor %}

|{% for column in table.columns %} --- |{% endfor %}

{% for row in table.rows %}
|{% for cell in row %} {{ cell }} |{% endfor %}

{% endfor %}
{% endif %}
{% if table.note %}

{{ table.note }}
{% endif %}
{% endfor %}
{% endfor %}
{% endfor %}

## Skipped trays

{% if skipped %}
| tray | rack | reason | skipped by |
| --- | --- | --- | --- |
{% for tray in skipped %}
| {{ tray.node }} | {{ tray.rack }} | {{ tray.reason }} | {{ tray.checks }} |
{% endfor %}
{% else %}
No GPU tray was skipped.
{% endif %}
{% if due.rows %}

## Due next

{{ due.intro }}

| tray | rack | due | reason |
| --- | --- | --- | --- |
{% for tray in due.rows %}
| {{ tray.node }} | {{ tray.rack }} | {{ tray.due }} | {{ tray.reason }} |
{% endfor %}
{% if due.more %}

{{ due.more }}
{% endif %}
{% endif %}
"""

HTML_TEMPLATE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #1d232a; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #c9d1d9; padding: 0.3em 0.6em; text-align: left; }
a { color: inherit; }
.pass { color: #1a7f37; font-weight: bold; }
.fail { color: #cf222e; font-weight: bold; }
.incomplete { color: #9a6700; font-weight: bold; }
.error { color: #8250df; font-weight: bold; }
.none { color: #57606a; }
table.facts th { background: #f6f8fa; font-weight: normal; color: #57606a; }
table.facts { margin: 0.3em 0 1em; }
table.facts code { white-space: pre; }
.fleet-map { display: flex; flex-direction: column; gap: 0.4em; margin: 0.5em 0 1.5em; }
.rack { display: flex; align-items: center; gap: 0.6em; }
.rack-name { min-width: 6em; font-weight: bold; }
.trays { display: flex; flex-wrap: wrap; gap: 3px; }
.tray { display: inline-block; min-width: 2.4em; padding: 0.25em 0.2em; border-radius: 3px; text-align: center;
  font-size: 0.8em; border: 1px solid #8c959f; cursor: default; }
.tray-passed { background: #aceebb; }
.tray-failed { background: #ff8182; font-weight: bold; }
.tray-skipped { background: #eaeef2; color: #57606a; }
.tray-missing { background: #ffffff; color: #cf222e; border: 1px dashed #cf222e; }
table.heatmap td { text-align: right; font-variant-numeric: tabular-nums; min-width: 4.5em; }
table.heatmap td.na { background: #eaeef2; color: #57606a; text-align: center; }
table.heatmap td.cell-fail { outline: 3px solid #cf222e; outline-offset: -3px; font-weight: bold; }
table.heatmap.compact th { font-size: 0.55em; padding: 0 0.1em; font-weight: normal; }
table.heatmap.compact td { min-width: 0; width: 0.75em; height: 0.75em; padding: 0; border: 0; }
table.heatmap.compact td.cell-fail { outline-width: 2px; outline-offset: -2px; }
svg.spark { display: block; }
.spark-grid { display: grid; grid-template-columns: repeat(auto-fill, 7.2em); gap: 4px; margin: 0.3em 0 1.2em; }
.spark-tray { margin: 0; padding: 2px; border: 1px solid #d0d7de; border-radius: 3px; font-size: 0.75em;
  text-align: center; }
.spark-tray-drop { border: 2px solid #cf222e; font-weight: bold; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="{{ verdict_css }}">{{ verdict }}: {{ verdict_words }}.</p>
{% if facts %}
<table class="facts">
{% for fact in facts %}
<tr><th>{{ fact.label }}</th><td>{{ fact.text }}</td></tr>
{% endfor %}
</table>
{% endif %}
<h2>Fleet map</h2>
<p><span class="tray tray-passed">passed</span> <span class="tray tray-failed">failed</span>
<span class="tray tray-skipped">skipped</span> <span class="tray tray-missing">missing</span> one box per GPU tray,
coloured by its worst verdict over the checks of this run, and one per declared tray the cluster lacks; hover a tray
for what it passed and what failed, or why it is missing.</p>
<div class="fleet-map">
{% for rack in fleet_map %}
<div class="rack"><div class="rack-name"><a href="#{{ rack.anchor }}">{{ rack.rack }}</a></div><div class="trays">
{% for tray in rack.trays %}
<span class="{{ tray.css }}" title="{{ tray.title }}">{{ tray.label }}</span>
{% endfor %}
</div></div>
{% endfor %}
</div>
{% if fleet_rows %}
<table class="fleet">
<tr><th>rack</th>{% for column in columns %}<th>{{ column }}</th>{% endfor %}<th>trays verified</th></tr>
{% for row in fleet_rows %}
<tr><th><a href="#{{ row.anchor }}">{{ row.rack }}</a></th>
{%- for cell in row.cells %}<td class="{{ cell.css }}" title="{{ cell.title }}">
{%- if cell.anchor %}<a href="#{{ cell.anchor }}">{{ cell.text }}</a>{% else %}{{ cell.text }}{% endif %}</td>
{%- endfor %}<td>{{ row.trays }}</td></tr>
{% endfor %}
</table>
{% endif %}
{% if trends %}
<h2>Trend of the kept runs</h2>
<table class="trend">
<tr><th>check</th><th>rack</th><th>runs</th><th>median of the medians (GB/s)</th><th>lowest pair (GB/s)</th>
<th>this run's median (GB/s)</th><th>baseline median (GB/s)</th><th>drop</th><th>medians, oldest first</th></tr>
{% for row in trends %}
<tr><td>{{ row.check }}</td><td>{{ row.rack }}</td><td>{{ row.runs }}</td><td>{{ row.median }}</td>
<td>{{ row.min }}</td><td>{{ row.latest }}</td><td>{{ row.baseline }}</td>
<td class="{{ row.css }}">{{ row.drop }}</td><td>{{ row.chart | safe }}</td></tr>
{% endfor %}
</table>
{% if tray_trends %}
<h3>Trays over the kept runs</h3>
<p>One chart per tray measured in two runs or more: the tray's lowest pair (the lowest GB/s of a GPU pair with a
GPU of the tray at either end) in each run, oldest on the left; the dashed line is its figure in the baseline run,
a red dot and frame a drop beyond the tolerance. Hover a chart for its numbers.</p>
{% for view in tray_trends %}
<p>{{ view.caption }}</p>
<div class="spark-grid">
{% for tray in view.trays %}
<figure class="{{ tray.css }}">{{ tray.chart | safe }}<figcaption>{{ tray.label }}</figcaption></figure>
{% endfor %}
</div>
{% endfor %}
{% endif %}
{% endif %}
{% for rack in racks %}
<section id="{{ rack.anchor }}">
<h2>{{ rack.rack }}</h2>
<p>{{ rack.headline }}</p>
{% for section in rack.sections %}
<section id="{{ section.anchor }}">
<h3>{{ section.check }} <span class="{{ section.css }}">{{ section.result }}</span></h3>
<p>{{ section.summary }}</p>
{% if section.facts %}
<table class="facts">
{% for fact in section.facts %}
{% if fact.code %}
<tr><th>{{ fact.label }}</th><td><code>{{ fact.text }}</code></td></tr>
{% else %}
<tr><th>{{ fact.label }}</th><td>{{ fact.text }}</td></tr>
{% endif %}
{% endfor %}
</table>
{% endif %}
{% if section.blamed %}
<table>
<tr><th>tray</th><th>problem</th></tr>
{% for tray in section.blamed %}
<tr><td>{{ tray.node }}</td><td>{{ tray.problem }}</td></tr>
{% endfor %}
</table>
{% endif %}
{% if section.violations %}
<ul>
{% for violation in section.violations %}
<li>{{ violation }}</li>
{% endfor %}
{% if section.more_violations %}
<li>{{ section.more_violations }}</li>
{% endif %}
</ul>
{% endif %}
{% for table in section.tables %}
{% if table.rows %}
{% if table.title %}
<p>{{ table.title }}</p>
{% endif %}
<table>
<tr>{% for column in table.columns %}<th>{{ column }}</th>{% endfor %}</tr>
{% for row in table.rows %}
<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% endif %}
{% if table.note %}
<p>{{ table.note }}</p>
{% endif %}
{% endfor %}
{% if section.heatmap %}
<p>{{ section.heatmap.caption }}</p>
<table class="{{ section.heatmap.css }}">
<tr><th>{{ section.heatmap.unit }}</th>{% for column in section.heatmap.columns %}<th title="{{ column.title }}">
{{- column.label }}</th>{% endfor %}</tr>
{% for row in section.heatmap.rows %}
<tr><th title="{{ row.title }}">{{ row.label }}</th>
{%- for cell in row.cells %}<td class="{{ cell.css }}"{% if cell.style %} style="{{ cell.style }}"{% endif %} \
title="{{ cell.title }}">{{ cell.text }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% endif %}
</section>
{% endfor %}
</section>
{% endfor %}
<h2>Skipped trays</h2>
{% if skipped %}
<table>
<tr><th>tray</th><th>rack</th><th>reason</th><th>skipped by</th></tr>
{% for tray in skipped %}
<tr><td>{{ tray.node }}</td><td>{{ tray.rack }}</td><td>{{ tray.reason }}</td><td>{{ tray.checks }}</td></tr>
{% endfor %}
</table>
{% else %}
<p>No GPU tray was skipped.</p>
{% endif %}
{% if due.rows %}
<h2 id="due-next">Due next</h2>
<p>{{ due.intro }}</p>
<table class="due">
<tr><th>tray</th><th>rack</th><th>due</th><th>reason</th></tr>
{% for tray in due.rows %}
<tr><td class="{{ tray.css }}">{{ tray.node }}</td><td>{{ tray.rack }}</td><td>{{ tray.due }}</td>\
<td>{{ tray.reason }}</td></tr>
{% endfor %}
</table>
{% if due.more %}
<p>{{ due.more }}</p>
{% endif %}
{% endif %}
</body>
</html>
"""
