"""`kwire report`: one self-contained HTML page that shows a capture's analysis to a person.

``page.render`` takes the summary document of `kwire pcap --summary --format json` (the same
analysis, its ``series`` section included) and gives the page: the document embedded as data, the
charting library (Apache ECharts, ``assets/echarts.min.js``) and the page's script inline, so that
the file opens offline and loads nothing.
"""
from __future__ import annotations

from kwire_cli.report.page import ECHARTS_VERSION, SECTIONS, render

__all__ = ["ECHARTS_VERSION", "SECTIONS", "render"]
