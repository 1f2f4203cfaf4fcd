"""publish and claims (issue 7): stamped tables, figures and claim records; claim verdicts."""
import math

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import claims as CL
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
    claims = [CL.numeric("x", "a", "a rate", 50.0, 52.0, source="tables/t.csv", tol=5, unit="%"),
              CL.qualitative("x", "b", "b holds", False, "no", source="tables/t.csv")]
    paths = fb.publish(claims, "x", run, to=tmp_path)
    assert paths[0].name == "claims_x.csv"
    back = read_table(paths[0])
    assert list(back.verdict) == ["reproduced", "differs"]
    with pytest.raises(TypeError, match="cannot write"):
        fb.publish(42, "x", run, to=tmp_path)


@pytest.mark.parametrize("ours, kw, verdict", [
    (85.0, {"ci": (79.9, 90.2)}, "reproduced"),
    (70.0, {"ci": (79.9, 90.2), "direction": True}, "same direction"),
    (70.0, {"ci": (79.9, 90.2), "direction": False}, "differs"),
    (58.0, {"tol": 5.0}, "differs"),
    (61.0, {"tol": 5.0}, "reproduced"),
    (None, {"tol": 5.0}, "not run"),
])
def test_claim_verdicts(ours, kw, verdict):
    c = CL.numeric("e", "id", "text", 65.7 if "tol" in kw else 85.4, ours, source="tables/x.csv", **kw)
    assert c.verdict == verdict
    assert c.verdict in CL.VERDICTS
    if ours is None:
        assert math.isnan(c.ours)


def test_claim_ids_are_unique():
    c = CL.qualitative("e", "a", "t", True, "m", source="s")
    with pytest.raises(ValueError, match="repeat"):
        CL.claims_frame([c, c])
