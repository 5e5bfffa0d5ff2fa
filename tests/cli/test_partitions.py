"""`tidelake partitions reassign`: Kafka's reassignment JSON is checked before any broker is asked; every
mistake is one line naming the file and the entry (the moves themselves: tests/cluster/test_reassignment.py)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tidelake.cli.errors import CliError
from tidelake.cli.main import cli
from tidelake.cli.partitions import Move, parse_reassignment_json


def test_kafkas_reassignment_json_is_read():
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 1, "replicas": [1]}]})
    assert parse_reassignment_json(text, "f.json") == [Move("a", 0, [2, 3]), Move("a", 1, [1])]


@pytest.mark.parametrize("doc, message", [
    ("{", "f.json: not JSON"),
    ('{"partitions": {}}', 'f.json: expected {"version":1,"partitions":[...]}'),
    ('{"version": 2, "partitions": []}', "f.json: unsupported version 2"),
    ('{"partitions": []}', "f.json: no partitions to reassign"),
    ('{"partitions": [{"partition": 0, "replicas": [1]}]}', "f.json: partitions[0]: topic must be a non-empty string"),
    ('{"partitions": [{"topic": "a", "partition": -1, "replicas": [1]}]}', "partition must be a non-negative"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": []}]}', "partitions[0]: replicas must be a non-"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}', "duplicate broker ids in replicas [1, 1]"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}', 'must be "any"'),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1]}, '
     '{"topic": "a", "partition": 0, "replicas": [2]}]}',
     "f.json: partitions[1]: a-0 is listed twice"),
])
def test_a_malformed_file_is_one_error_naming_the_entry(doc, message):
    with pytest.raises(CliError) as e:
        parse_reassignment_json(doc, "f.json")
    assert message in e.value.message


def test_the_command_needs_an_action_and_reports_a_bad_file_in_one_line(tmp_path):
    f = tmp_path / "move.json"
    f.write_text('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": "2"}]}')
    r = CliRunner().invoke(cli, ["partitions", "reassign", "--reassignment-json-file", str(f)])
    assert r.exit_code == 2 and "give one of --generate, --execute, --verify, --cancel" in r.output
    r = CliRunner().invoke(cli, ["partitions", "reassign", "--execute"])
    assert r.exit_code == 2 and "--execute needs --reassignment-json-file" in r.output
    r = CliRunner().invoke(cli, ["partitions", "reassign", "--generate", "--broker-list", "1,2"])
    assert r.exit_code == 2 and "--generate needs --topics-to-move-json-file and --broker-list" in r.output
    r = CliRunner().invoke(cli, ["partitions", "reassign", "--reassignment-json-file", str(f), "--execute"])
    assert r.exit_code == 1
    assert r.output.strip() == (f"tidelake: error: {f}: partitions[0]: replicas must be a non-empty list of broker ids "
                                "(tidelake partitions reassign)")


def test_elect_leaders_needs_one_way_of_naming_partitions(tmp_path):
    base = ["partitions", "elect-leaders", "--election-type", "preferred"]
    r = CliRunner().invoke(cli, base)
    assert r.exit_code == 2 and "give exactly one of --topic with --partition" in r.output
    r = CliRunner().invoke(cli, [*base, "--topic", "t"])
    assert r.exit_code == 2 and "--topic and --partition go together" in r.output
    r = CliRunner().invoke(cli, [*base, "--topic", "t", "--partition", "0", "--all-topic-partitions"])
    assert r.exit_code == 2
    bad = tmp_path / "p.json"
    bad.write_text('{"partitions": [{"partition": 0}]}')
    r = CliRunner().invoke(cli, [*base, "--path-to-json-file", str(bad)])
    assert r.exit_code == 1 and f'{bad}: expected {{"partitions":[{{"topic":"t","partition":0}}, ...]}}' in r.output
