"""report.html (issue 44, point 1): written by every `eval` beside report.md, self-contained (nothing fetched,
no script), every number of its tables the one card.json holds, any name escaped; and a look at it in
headless Chromium (slow, skipped where Chromium is absent)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from tests.sharing.conftest import AGENTS

# on one worker: the cards these modules read are made once (each costs seconds), not on both
pytestmark = pytest.mark.xdist_group("sharing_cards")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def card(cards) -> tuple[Path, dict, BeautifulSoup]:
    out = cards["v1"]
    doc = json.loads((out / "card.json").read_text())
    return out, doc, BeautifulSoup((out / "report.html").read_text(encoding="utf-8"), "html.parser")


def _table(soup: BeautifulSoup, key: str) -> list[dict]:
    table = soup.find("table", attrs={"data-table": key})
    assert table is not None, key
    head = [th.get_text() for th in table.find("thead").find_all("th")]
    return [dict(zip(head, (td.get_text() for td in tr.find_all("td")))) for tr in table.find("tbody").find_all("tr")]


def _shown(value, decimals: int) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def _ci(pair, decimals: int) -> str:
    return "–" if not pair or pair[0] is None else f"[{pair[0]:.{decimals}f}, {pair[1]:.{decimals}f}]"


def test_every_eval_writes_report_html_beside_report_md(card):
    out, _, soup = card
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    assert soup.find("h1").get_text() == "Report card: mine"
    assert len(soup.find_all("img")) == 4  # standing, archetypes, calls and ticks, the worst twin pair


def test_the_page_fetches_nothing_and_runs_nothing(card):
    _, _, soup = card
    html = str(soup)
    sources = [img["src"] for img in soup.find_all("img")]
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert soup.find("script") is None and soup.find("link") is None
    assert not re.search(r"(?:src|href)=\"(?!data:|#)", html)


def test_the_standing_table_is_card_json_s_table2(card):
    _, doc, soup = card
    shown, k = _table(soup, "table2"), doc["headline"]["k"]
    assert [r["policy"] for r in shown] == [e["policy"] for e in doc["table2"]] and len(shown) == 10
    for row, e in zip(shown, doc["table2"]):
        assert row["episodes"] == str(e["episodes"])
        assert row["exact %"] == _shown(e["exact_pct"], 1) and row["exact 95% interval"] == _ci(e["exact_ci"], 1)
        assert row["mean gap $"] == _shown(e["mean_gap"], 2) and row["gap 95% interval"] == _ci(e["gap_ci"], 2)
        assert row[f"pass^{k} %"] == _shown(e["pass_k_pct"], 1)
        assert row["violation %"] == _shown(e["violation_pct"], 1)
        assert float(row["gap - gate $"]) == pytest.approx(e["diff_to_gate"], abs=0.005)
    mine = [tr for tr in soup.find("table", attrs={"data-table": "table2"}).find_all("tr") if "mine" in tr.get("class", [])]
    assert len(mine) == 1 and mine[0].find("td").get_text() == doc["agent"]


def test_the_archetype_and_usage_tables_are_card_json_s(card):
    _, doc, soup = card
    arche = _table(soup, "archetypes")
    assert [r["archetype"] for r in arche] == [a["archetype"] for a in doc["archetypes"]] and arche
    for row, a in zip(arche, doc["archetypes"]):
        assert row["mine exact %"] == _shown(a["exact_pct"], 1)
        assert row["gate exact %"] == _shown(a["gate_exact_pct"], 1)
        assert row["mine mean gap $"] == _shown(a["mean_gap"], 2)
        assert float(row["diff $"]) == pytest.approx(a["diff"], abs=0.005)
    usage = _table(soup, "usage")
    want = [(f"{what} ({who})", doc["usage"][key][what]) for what in ("calls", "ticks")
            for key, who in (("agent", "mine"), ("gate", "finality_gate"))]
    assert [r[""] for r in usage] == [w for w, _ in want]
    for row, (_, s) in zip(usage, want):
        assert [row[q] for q in ("mean", "p10", "median", "p90", "max")] == [_shown(s[q], 1) for q in
                                                                            ("mean", "p10", "median", "p90", "max")]


def test_the_page_holds_report_md_s_tables_and_warnings(card):
    out, doc, soup = card
    text = soup.get_text()
    assert "Table II: mine beside the nine" in text and "How its cases ended" in text
    md_tables = (out / "report.md").read_text().count("\n|:")
    assert len(soup.find_all("table")) >= md_tables + 3 > 3
    assert [p.get_text() for p in soup.find_all("p", class_="warning")] == [f"Warning. {w}" for w in doc["warnings"]]


def test_a_name_that_is_markup_is_shown_as_text(cards):
    html = (cards["markup"] / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert BeautifulSoup(html, "html.parser").find("script") is None


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed here (Debian's chromium package; "
                                             ".ci/run installs it)")
def test_the_page_renders_in_headless_chromium(card, tmp_path):
    out, _, _ = card
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars", "--window-size=1366,2200",
                    f"--screenshot={shot}", (out / "report.html").resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (1366, 2200)
    colours = image.resize((137, 220)).getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 50  # figures and tables drawn, not a blank or an error page
    keep = Path(__file__).resolve().parents[2] / "build" / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "report_html.png")  # for a person to look at
    assert AGENTS  # the agents file the card was made from
