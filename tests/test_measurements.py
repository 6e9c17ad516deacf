"""The suite's own timings are data (measurements/suite.jsonl), shown by a generated table (#55 item 3)."""

import json

import pytest

from rackbench.core.errors import ConfigError
from rackbench.history import measurements

pytestmark = pytest.mark.offline


def test_every_record_reads_and_the_table_shows_latest_and_best_per_kind():
    records = measurements.read()
    assert len(records) > 100 and {r["kind"] for r in records} == set(measurements.KINDS)
    assert not any("stop " in r["what"].lower() for r in records)            # no word of how the team works
    table = measurements.table(records)
    ci = next(line for line in table.splitlines() if line.startswith("| CI |"))
    best = min((r for r in records if r["kind"] == "ci"), key=lambda r: r["wall_s"])
    assert ci.endswith(f"| {best['date']}, {best['commit'] or 'a landing'}: {best['wall']} |"), ci


def test_a_bad_record_names_the_file_and_its_line(tmp_path):
    path = tmp_path / "suite.jsonl"
    good = {"date": "2026-12-06", "commit": "abc1234", "kind": "ci", "wall_s": 1.0, "wall": "1 s", "what": "x"}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "kind": "nope"}) + "\n")
    with pytest.raises(ConfigError) as err:
        measurements.read(path)
    assert f"{path}: line 2: kind 'nope'" in str(err.value.problems[0])
    assert measurements.read(tmp_path / "absent.jsonl") == []
