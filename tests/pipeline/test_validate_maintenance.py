"""``tidelake pipeline validate`` says for each table stage how it is maintained: the plan, the state it keeps and
what makes it recompute from the upstream's snapshot (or why it is full-refresh only)."""
from __future__ import annotations

from click.testing import CliRunner

from tidelake.cli.main import cli

STAGES = {
    "by_region.yaml": "source: {table: ../orders}\n"
                      "transform: \"SELECT region, count(*) AS n, sum(amount) AS total, avg(amount) AS mean, "
                      "min(amount) AS lo, max(amount) AS hi, count(amount) AS c FROM source GROUP BY region\"\n"
                      "state: {extremes: {kept: 64}}\nsink: {table: ../by_region}\n",
    "zones.yaml": "source: {table: ../orders, tables: {regions: ../regions}}\n"
                  "transform: \"SELECT r.zone, sum(o.amount) AS total FROM source o JOIN regions r "
                  "ON o.region = r.region GROUP BY r.zone\"\nsink: {table: ../zones}\n",
    "crossed.yaml": "source: {table: ../orders, tables: {regions: ../regions}}\n"
                     "transform: \"SELECT o.region, count(*) AS n FROM source o CROSS JOIN regions r "
                     "GROUP BY o.region\"\nsink: {table: ../crossed}\n",
    "paid.yaml": "source: {table: ../orders}\ntransform: \"SELECT * FROM source WHERE amount > 0\"\n"
                 "sink: {table: ../paid}\n",
    "top.yaml": "source: {table: ../by_region}\ntransform: \"SELECT region, total FROM source ORDER BY total DESC "
                "LIMIT 2\"\nrefresh: full\nsink: {table: ../top, primary_key: [region]}\n",
}


def test_validate_says_how_each_table_stage_is_maintained(tmp_path):
    chain = tmp_path / "chain"
    chain.mkdir()
    for name, text in STAGES.items():
        (chain / name).write_text(text)
    result = CliRunner().invoke(cli, ["pipeline", "validate", str(chain)])
    assert result.exit_code == 0, result.output
    stages = {}
    for line in result.output.splitlines():
        if not line.startswith("  "):
            current = stages.setdefault(line.split(":")[0], [])
        else:
            current.append(line.strip())
    assert stages["by_region.yaml"] == [
        "maintained: incremental aggregate: each step retracts the changed rows' before-images from their groups' "
        "state and adds their after-images",
        "state: per group: row count; sum(amount): sum and non-null count; avg(amount): sum and non-null count; "
        "min(amount): the 64 lowest distinct values with their counts, and non-null count; max(amount): the 64 "
        "highest distinct values with their counts, and non-null count; count(amount): non-null count (hidden "
        "columns of the sink)",
        "recomputes: a group whose min/max list was truncated (more than 64 distinct values) and is emptied by "
        "retractions refills it from the upstream's snapshot (that group only)"]
    assert stages["zones.yaml"][2:] == [
        "recomputes: never: every change is answered from the state",
        "joins: a change of regions rejoins only the upstream rows whose join value it changed (retracted through "
        "its old version, added through its new one)"]
    assert stages["crossed.yaml"][2].startswith("recomputes: a change of regions (read by name) refreshes the whole "
                                                "result from the snapshots once (")
    assert stages["paid.yaml"][0].startswith("maintained: incremental rows")
    assert stages["top.yaml"] == [
        "maintained: full refresh: every step re-runs the transform over the upstream's snapshot and overwrites the "
        "sink", "why: ORDER BY / LIMIT (a top-N): a row leaving it brings in one the increment does not hold"]
