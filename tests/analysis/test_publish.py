"""publish and claims (issue 7): stamped tables, figures and claim records (verdicts: test_verdicts.py)."""

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import verdicts as CL
from finbench.analysis.tables import read_table

SMALL = fb.make_corpus(n_tasks=40)


def test_publish_stamps_tables_figures_and_claims(tmp_path):
    import matplotlib.pyplot as plt

    run = fb.Run(SMALL, seeds=[0, 1], n_boot=10)
    table = pd.DataFrame({"policy": ["a", "b"], "x": [1.0, 2.5]})
    csv, md = fb.publish(table, "t", run, to=tmp_path)
    assert f"# corpus: {SMALL.fingerprint}" in csv.read_text() and "- seeds: 0,1" in md.read_text()
    pd.testing.assert_frame_equal(read_table(csv), table)
    fig, ax = plt.subplots()
    png, pdf = fb.publish(fig, "f", run, to=tmp_path)
    assert png.suffix == ".png" and pdf.suffix == ".pdf"
    assert png.read_bytes().startswith(b"\x89PNG") and pdf.read_bytes().startswith(b"%PDF")
    assert any(run.caption() in t.get_text() for t in fig.texts)
    rows = {r.id: r for r in CL.paper_claims()}
    claims = [CL.decide(rows["headline.gate_exact"], CL.Measure(85.0), "tables/t.csv"),
              CL.decide(rows["plan_search.beaten_late_chargeback"], CL.Measure(False), "tables/t.csv")]
    paths = fb.publish(claims, "x", run, to=tmp_path)
    assert paths[0].name == "claims_x.csv"
    back = read_table(paths[0])
    assert list(back.verdict) == ["reproduced", "differs"]
    with pytest.raises(TypeError, match="cannot write"):
        fb.publish(42, "x", run, to=tmp_path)


def test_claim_ids_are_unique():
    c = CL.decide(CL.paper_claims("plan_search")[0], CL.Measure(2))
    with pytest.raises(ValueError, match="repeat"):
        CL.claims_frame([c, c])
