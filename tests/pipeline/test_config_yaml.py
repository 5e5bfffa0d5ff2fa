"""Pipeline YAML checked before anything starts: unknown keys, types and ranges, each error naming file:line."""
from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from tidelake.cli.main import cli
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError, SparkConfig
from tidelake.spark.pipeline_yaml import load_pipeline_yaml

GOOD = """\
source:
  bootstrap_servers: 127.0.0.1:9092
  topic: orders
  group_id: g
  max_rate_per_partition: 50
  batch_interval: 2s
offsets: exactly-once
sink:
  table: out
  format: debezium-json
  primary_key: id
  schema: id long, amount long
  buckets: 4
"""


def _write(tmp_path, text: str):
    path = tmp_path / "orders.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file_loads(tmp_path):
    cfg = load_pipeline_yaml(_write(tmp_path, GOOD))
    assert cfg.sink.primary_key == ["id"] and cfg.sink.buckets == 4
    assert cfg.sink.table == str(tmp_path / "out") and cfg.source.batch_interval == 2.0


def test_s3_sink_with_storage_options(tmp_path):
    """An s3:// table is taken as is (not as a path under the YAML's folder), with its S3 settings."""
    cfg = load_pipeline_yaml(_write(tmp_path, GOOD.replace("  table: out", "  table: s3://lake/orders\n"
                                                           "  storage_options: {endpoint: 'http://127.0.0.1:9000',"
                                                           " region: us-east-1}")))
    assert cfg.sink.table == "s3://lake/orders"
    assert cfg.sink.storage_options == {"endpoint": "http://127.0.0.1:9000", "region": "us-east-1"}


@pytest.mark.parametrize("old, new, message", [
    ("  table: out", "  table: out\n  storage_options: {endpont: x}",
     "orders.yaml:10: sink.storage_options: unknown option(s) endpont (known: endpoint, region"),
    ("  table: out", "  table: gs://lake/out", "orders.yaml:9: sink.table must be a path or s3://bucket/prefix"),
    ("source:", "sourse:", "orders.yaml:1: unknown key 'sourse' (did you mean 'source'?)"),
    ("  buckets: 4", "  buckets: four", "orders.yaml:13: sink.buckets: expected an integer >= 1, got 'four'"),
    ("  buckets: 4", "  buckets: 0", "orders.yaml:13: sink.buckets: expected an integer >= 1, got 0"),
    ("  topic: orders", "  topik: orders", "orders.yaml:3: unknown key 'topik' in source (did you mean 'topic'?)"),
    ("  max_rate_per_partition: 50", "  max_rate_per_partition: [1]",
     "orders.yaml:5: source.max_rate_per_partition: expected an integer >= 1, got [1]"),
    ("  format: debezium-json", "  format: avro2", "orders.yaml:10: sink.format must be one of"),
    ("  format: debezium-json", "  format: avro", "orders.yaml:10: sink.format avro needs a schema_registry section"),
    ("offsets: exactly-once", "offsets: sometimes", "orders.yaml:7: offsets must be one of"),
    ("  batch_interval: 2s", "  batch_interval: soon", "orders.yaml:6: source.batch_interval:"),
    ("  group_id: g\n", "", "orders.yaml:1: source.group_id is required"),
    ("  schema: id long, amount long", "  schema: [id]", "orders.yaml:12: sink.schema: expected a string, got"),
    ("  buckets: 4", "  buckets: 4\n  properties:\n    compaction.parallelism: zero",
     "orders.yaml:15: sink.properties: table property compaction.parallelism: 'zero' is not an integer >= 1"),
    ("  buckets: 4", "  buckets: 4\n  properties: {owner: ops}", "orders.yaml:14: sink.properties: table property owner: "
                                                                 "unknown"),
    ("offsets: exactly-once", "offsets: exactly-once\nspark: {master: 'local[1]', confs: {}}",
     "orders.yaml:8: unknown key 'confs' in spark (did you mean 'conf'?)"),
])
def test_errors_name_file_and_line(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline_yaml(_write(tmp_path, GOOD.replace(old, new)))
    assert str(e.value).startswith(message)


def test_malformed_yaml_names_line(tmp_path):
    with pytest.raises(PipelineConfigError, match=r"^orders.yaml:3: malformed YAML"):
        load_pipeline_yaml(_write(tmp_path, "source:\n  topic: a\n  - b\n"))


def test_cli_prints_one_line(tmp_path):
    path = _write(tmp_path, GOOD.replace("  buckets: 4", "  buckets: four"))
    result = CliRunner().invoke(cli, ["pipeline", "run", str(path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "orders.yaml:13: sink.buckets: expected an integer >= 1, got 'four'" in lines[0]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_schema_type_typo_is_one_line_before_spark_starts(tmp_path, command):
    """issue 35: `region strng` passed validate and failed 15 s later in Spark's parser."""
    from pyspark import SparkContext

    from tidelake.spark.ddl_schema import VALID_TYPES
    path = _write(tmp_path, GOOD.replace("id long, amount long", "id long, region strng"))
    result = CliRunner().invoke(cli, ["pipeline", command, str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"tidelake: error: orders.yaml:12: sink.schema: column region: unknown type 'strng' "
                           f"(valid types: {VALID_TYPES})")
    assert SparkContext._active_spark_context is None


@pytest.mark.parametrize("schema, message", [
    ("id long, amount decimal(40,2)", "column amount: decimal(40, 2): precision must be 1 to 38"),
    ("id long, tags array<strin>", "column tags: unknown type 'strin'"),
    ("id long, m map<string>", "column m: expected ',' after map<KEY, got '>'"),
    ("id long, s struct<a: int, b: bool>", "column s: column b in struct<...>: unknown type 'bool'"),
])
def test_nested_and_decimal_types_are_checked(tmp_path, schema, message):
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline_yaml(_write(tmp_path, GOOD.replace("id long, amount long", f'"{schema}"')))
    assert str(e.value).startswith(f"orders.yaml:12: sink.schema: {message}")


def test_example_passes_the_checks(tmp_path):
    result = CliRunner().invoke(cli, ["pipeline", "example"])
    assert result.exit_code == 0
    cfg = load_pipeline_yaml(_write(tmp_path, result.output))
    assert cfg.offsets == "exactly-once"


def test_metrics_section(tmp_path):
    assert load_pipeline_yaml(_write(tmp_path, GOOD)).metrics.listen is None  # off unless set
    cfg = load_pipeline_yaml(_write(tmp_path, GOOD + "metrics: {listen: 127.0.0.1:9405, ready_intervals: 5}\n"))
    assert (cfg.metrics.listen, cfg.metrics.ready_intervals) == ("127.0.0.1:9405", 5)
    for extra, message in (("metrics: {listn: 127.0.0.1:9405}\n",
                            "orders.yaml:14: unknown key 'listn' in metrics (did you mean 'listen'?)"),
                           ("metrics:\n  listen: 9405\n", "orders.yaml:15: metrics.listen: expected a string, got 9405"),
                           ("metrics:\n  listen: nohost\n",
                            "orders.yaml:15: metrics.listen: expected HOST:PORT, got 'nohost'"),
                           ("metrics:\n  ready_intervals: 0\n",
                            "orders.yaml:15: metrics.ready_intervals: expected an integer >= 1, got 0")):
        with pytest.raises(PipelineConfigError) as e:
            load_pipeline_yaml(_write(tmp_path, GOOD + extra))
        assert str(e.value) == message


def test_example_config_loads(tmp_path):
    text = CliRunner().invoke(cli, ["pipeline", "example"]).output
    assert "# metrics: {listen: 127.0.0.1:9405" in text
    assert load_pipeline_yaml(_write(tmp_path, text)).metrics.listen is None


TYPED = GOOD.replace("  format: debezium-json\n  primary_key: id\n  schema: id long, amount long\n",
                     "  format: avro\n") + "schema_registry:\n  url: http://127.0.0.1:8081\n  timeout: 5\n"


def test_typed_format_with_a_schema_registry(tmp_path):
    """sink.format avro takes its schema and key from the registry: neither sink.schema nor primary_key needed."""
    cfg = load_pipeline_yaml(_write(tmp_path, TYPED))
    assert cfg.sink.format == "avro" and cfg.schema_registry.url == "http://127.0.0.1:8081"
    assert cfg.schema_registry.timeout == 5 and cfg.value_format().registry_decoder is not None


@pytest.mark.parametrize("old, new, message", [
    ("  url: http://127.0.0.1:8081", "  uri: http://127.0.0.1:8081",
     "orders.yaml:13: unknown key 'uri' in schema_registry (did you mean 'url'?)"),
    ("  url: http://127.0.0.1:8081", "  url: 127.0.0.1:8081",
     "orders.yaml:13: schema_registry.url must be an http:// or https:// URL"),
    ("  timeout: 5", "  timeout: soon", "orders.yaml:14: schema_registry.timeout: expected a number, got 'soon'"),
])
def test_schema_registry_errors_name_file_and_line(tmp_path, old, new, message):
    with pytest.raises(PipelineConfigError) as e:
        load_pipeline_yaml(_write(tmp_path, TYPED.replace(old, new)))
    assert str(e.value).startswith(message), str(e.value)


def test_every_top_level_default_is_the_config_class_default(tmp_path):
    cfg = load_pipeline_yaml(_write(tmp_path, GOOD.replace("offsets: exactly-once\n", "")))
    default = PipelineConfig(source=cfg.source, sink=cfg.sink)
    assert (cfg.offsets, cfg.commit, cfg.on_error, cfg.spark) == (default.offsets, default.commit, default.on_error,
                                                                   SparkConfig())
    spark = load_pipeline_yaml(_write(tmp_path, GOOD + "spark: {conf: {spark.driver.memory: 1g}}\n")).spark
    assert spark == SparkConfig(master=SparkConfig().master, conf={"spark.driver.memory": "1g"})
