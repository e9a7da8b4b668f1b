"""`errorflow sweep` on a three-axis sweep with measures, and `errorflow report` of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.main import main

THREE_AXES = str(Path(__file__).parent / "scenarios" / "sweep_three_axes.yaml")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_three_axis_sweep_prints_its_measures_beside_the_published_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.db")
    code, out, err = cli(capsys, "sweep", THREE_AXES, "--trials", "4", "--db", db)
    assert code == 0, err
    assert "cell 8 of 8: chain/0.5/flag: 4 trials" in err
    assert "sweep-three-axes: topology × rate × defence" in out
    table = out.split("sweep-three-axes: measures")[1]
    assert "drop" in table and "recovered" in table and "error ×" in table
    assert "pub. 96.4 %" in table and "pub. 23.7 %" in table and "pub. 4.4×" in table
    assert "against rate = 0" in table and "against topology = single" in table
    group = out.split("\ngroup ")[1].split(";")[0]
    code, md, _ = cli(capsys, "report", group, "--db", db)
    assert code == 0
    report = md.split("## Sweep measures")[1]
    assert "| topology | rate | defence | success | drop | recovered | error × |" in report
    assert "(pub. 96.4 %)" in report
    code, page, _ = cli(capsys, "report", group, "--db", db, "--format", "html")
    assert code == 0 and "<h2>Sweep measures</h2>" in page and "<td>chain</td>" in page
    code, doc, _ = cli(capsys, "report", group, "--db", db, "--format", "json")
    assert json.loads(doc)["sweep"]["axes"][1] == {"name": "rate", "values": ["0", "0.5"]}


def test_the_json_measures_match_the_cells_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", THREE_AXES, "--trials", "4", "--no-baseline", "--json"]
    code, out, _ = cli(capsys, *args, "--db", str(tmp_path / "j.db"))
    assert code == 0
    data = json.loads(out)
    assert [a["name"] for a in data["axes"]] == ["topology", "rate", "defence"]
    assert len(data["cells"]) == 8
    m = data["measures"]
    assert m["against"]["recovered"] == {"axis": "defence", "value": "none"}
    drop = m["cells"]["chain/0.5/none"]["drop"]
    assert drop["against"] == "chain/0/none"
    for label, (success, measured) in drop["counts"].items():
        assert data["cells"][label]["outcomes"]["success"] == success
        assert measured == 4
    s, n = drop["counts"]["chain/0.5/none"]
    s0, n0 = drop["counts"]["chain/0/none"]
    if s0:
        assert drop["value"] == pytest.approx((s0 / n0 - s / n) / (s0 / n0), abs=1e-4)
    else:
        assert drop["value"] is None and drop["note"].startswith("n/a")
    assert m["cells"]["single/0.5/flag"]["amplification"]["note"] == "baseline"
    assert "drop" in m["published"]["chain/0.5/none"]
    assert "drop" not in m["published"].get("chain/0/none", {})  # a baseline has no figure


def test_a_sweep_without_measures_prints_and_stores_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "o.db")
    args = ["sweep", "message-rewrite", "--trials", "2", "--no-baseline", "--db", db]
    code, out, _ = cli(capsys, *args, "--json")
    assert code == 0 and "measures" not in json.loads(out)
    code, out, _ = cli(capsys, *args)
    assert code == 0 and ": measures" not in out
    group = out.split("\ngroup ")[1].split(";")[0]
    code, md, _ = cli(capsys, "report", group, "--db", db)
    assert code == 0 and "Sweep measures" not in md


def test_vary_takes_three_axes_and_refuses_a_fourth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "v.db")
    vary = ["--vary", "propagation=explicit,implicit", "--vary", "seed=1,2",
            "--vary", "agents.writer.model.profile=small-local,frontier"]  # fmt: skip
    code, out, _ = cli(
        capsys, "sweep", THREE_AXES, *vary, "--trials", "1", "--no-baseline", "--json", "--db", db
    )
    assert code == 0
    data = json.loads(out)
    assert len(data["cells"]) == 8 and "measures" not in data  # the block's axes are others
    code, _, err = cli(capsys, "sweep", THREE_AXES, *vary, "--vary", "trials=1,2", "--db", db)
    assert code == 2 and "expected one to 3 fields to vary, found 4" in err


@pytest.mark.parametrize(
    ("vary", "said"),
    [
        (["seed=1", "--vary", "seed=2"], "seed is varied twice"),
        (["seed=1,2,1"], "'1' is given twice"),
    ],
)
def test_vary_refuses_a_field_or_a_value_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], vary: list[str], said: str
) -> None:
    """Each would run other cells than the table's labels say."""
    db = tmp_path / "t.db"
    code, _, err = cli(capsys, "sweep", "contamination", "--vary", *vary, "--db", str(db))
    assert code == 2 and said in err and not db.exists()
