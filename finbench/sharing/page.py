"""Self-contained HTML pages (a card's `report.html`, `compare.html`, `leaderboard.html`): one file that
opens from disk in any browser, with its figures inline as PNG data, its own style, no script and nothing
fetched. Every text that comes from a result (an agent's name, a message) is escaped.

    html = page("Report card: patient", [section("Standing", figure_html(fig), table_html(df))], stamp)
"""
from __future__ import annotations

import base64
import html
import io
import re

import pandas as pd

__all__ = ["figure_html", "markdown_html", "md_text", "one_line", "page", "png_html", "section", "table_html", "text"]

_ESCAPES = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_MARKUP = re.compile(r"([\\`*|<>$])")
_NUMBER = re.compile(r"[+-]?\d[\d,]*(\.\d+)?")
STYLE = """
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:1.8em}h3{font-size:1.05em}
.stamp{color:#555;font-size:.85em}.stamp code{font-size:.95em}
.warning{background:#fff4e5;border-left:4px solid #e08a00;padding:.6em 1em;margin:1em 0}
.note{color:#444;font-size:.9em}
table{border-collapse:collapse;margin:.8em 0;font-size:.86em}
th,td{border:1px solid #d6d6d6;padding:.25em .55em;vertical-align:top}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.mine td{background:#eaf2fb;font-weight:bold}
figure{margin:1em 0}img{max-width:100%;height:auto}figure img{border:1px solid #eee}
figcaption{color:#555;font-size:.85em}
pre,code{font-family:"DejaVu Sans Mono",Menlo,monospace}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;
font-size:.8em;white-space:pre-wrap;word-break:break-all}
details{margin:.6em 0}.wide{overflow-x:auto}
"""


def one_line(name) -> str:
    """A name as one line of printable text: escape sequences dropped, controls and line breaks a space."""
    cleaned = _ESCAPES.sub("", str(name))
    return " ".join("".join(ch if ch.isprintable() else " " if ch.isspace() else "" for ch in cleaned).split())


def md_text(name) -> str:
    """A name as Markdown text: one line (no heading, no table row of its own), `|` and markup escaped."""
    return _MARKUP.sub(r"\\\1", one_line(name))


def text(value) -> str:
    """Any value as escaped HTML text."""
    return html.escape(str(value), quote=True)


def page(title: str, parts: list[str], stamp: dict | None = None) -> str:
    """The whole document: `title` (escaped), the stamp's entries, then `parts` (HTML)."""
    head = (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{text(title)}</h1>\n")
    stamped = "" if not stamp else ("<p class=\"stamp\">" + " · ".join(
        f"{text(k)}: <code>{text(v)}</code>" for k, v in stamp.items()) + "</p>\n")
    return head + stamped + "\n".join(parts) + "\n</body>\n</html>\n"


def section(title: str, *parts: str, anchor: str = "") -> str:
    where = f" id=\"{text(anchor)}\"" if anchor else ""
    return f"<section{where}>\n<h2>{text(title)}</h2>\n" + "\n".join(p for p in parts if p) + "\n</section>"


def png_html(data: bytes, alt: str, caption: str = "") -> str:
    """A PNG inline (a data URL), with its caption."""
    src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    cap = f"<figcaption>{text(caption)}</figcaption>" if caption else ""
    return f"<figure><img src=\"{src}\" alt=\"{text(alt)}\">{cap}</figure>"


def figure_html(fig, alt: str, caption: str = "") -> str:
    """A matplotlib figure inline, drawn as the package saves its figures (no timestamp, no software name:
    the same figure gives the same bytes), then closed."""
    import matplotlib.pyplot as plt  # lazy: matplotlib loads only to draw
    from finbench.analysis.plotting import PNG_DPI, PNG_METADATA  # lazy: as above

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=PNG_DPI, metadata=PNG_METADATA)
    finally:
        plt.close(fig)
    return png_html(buf.getvalue(), alt, caption)


def table_html(df: pd.DataFrame, formats: dict | None = None, *, mine: str | None = None, key: str = "",
               anchor: str = "") -> str:
    """`df` as an HTML table: numbers right-aligned, each column formatted by `formats` (a format string or
    a function, by column; default: the value as it is), the row whose first column equals `mine` in bold,
    every cell escaped. `key` names the table (`data-table`) for a reader that checks it."""
    formats = formats or {}
    head = "".join(f"<th>{text(c)}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for col, value in zip(df.columns, row):
            shown = _formatted(value, formats.get(col))
            numeric = (isinstance(value, (int, float)) and not isinstance(value, bool)
                       or isinstance(value, str) and _NUMBER.fullmatch(value) is not None)
            cells.append(f"<td class=\"n\">{text(shown)}</td>" if numeric else f"<td>{text(shown)}</td>")
        cls = " class=\"mine\"" if mine is not None and str(row[0]) == mine else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    attrs = (f" data-table=\"{text(key)}\"" if key else "") + (f" id=\"{text(anchor)}\"" if anchor else "")
    return (f"<div class=\"wide\"><table{attrs}><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(body)
            + "\n</tbody></table></div>")


def _formatted(value, how) -> str:
    if value is None or isinstance(value, float) and value != value:
        return "–"
    if how is None:
        return str(value)
    return how(value) if callable(how) else format(value, how)


def markdown_html(markdown: str) -> str:
    """Markdown (a card's report.md, its tables included) as HTML; any HTML inside it is escaped, not run."""
    import mistune  # lazy: only pages need it

    return mistune.create_markdown(escape=True, plugins=["table"])(markdown)
