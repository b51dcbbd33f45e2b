"""`klineage report`: one self-contained HTML page (inline CSS, SVG and a little optional JS) with
the corpus overview, every lineage drawn, every skill card with its evidence, and the
materialization traces — readable offline and with JavaScript off."""

from klineage.report.render import render_report, write_report

__all__ = ["render_report", "write_report"]
