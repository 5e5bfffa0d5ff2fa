"""``tidelake pipeline run PIPELINE.yaml [--once]`` and ``tidelake pipeline status PIPELINE.yaml``."""
from __future__ import annotations

import logging
import sys

import click


@click.group()
def pipeline() -> None:
    """Kafka topic -> PySpark -> tidelake table, with auto / commit-after / seo / exactly-once offsets."""


@pipeline.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--once", is_flag=True,
              help="Process what is available now (in rate-capped batches), commit, exit 0 (AvailableNow).")
@click.option("--max-batches", type=int, default=None,
              help="Stop gracefully after this many batches (as a SIGTERM would).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings on stderr.")
def run(config: str, once: bool, max_batches: int | None, quiet: bool) -> None:
    """Run the pipeline described by CONFIG (YAML). SIGTERM/SIGINT stop it after the current batch."""
    from tidelake.spark.runner import Pipeline, PipelineConfigError, install_signal_handlers

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        p = Pipeline.from_yaml(config)
    except PipelineConfigError as e:
        raise click.UsageError(str(e)) from e
    install_signal_handlers(p)
    summary = p.run(once=once, max_batches=max_batches)
    click.echo(f"{summary.mode}: {len(summary.batches)} batches, {summary.records} records, "
               f"offsets {summary.start_offsets} -> {summary.end_offsets} ({summary.stopped_by})")


@pipeline.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
def status(config: str) -> None:
    """Where the pipeline is: per partition the broker group's, the gtoffset file's and the table's offsets,
    the log end and the lag."""
    import yaml
    from pathlib import Path
    from rich.console import Console
    from rich.table import Table as RichTable

    from tidelake.spark.offsets import BrokerOffsets, GtoffsetFile, offsets_from_app_state
    from tidelake.spark.runner import PipelineConfig

    path = Path(config)
    cfg = PipelineConfig.from_dict(yaml.safe_load(path.read_text()), base_dir=path.parent)
    src = cfg.source
    with BrokerOffsets(src.bootstrap_servers, src.topic, src.group_id, src.kafka) as broker:
        partitions = broker.partitions()
        earliest, latest = broker.watermarks(partitions)
        committed = broker.committed(partitions) or {}
    gt = GtoffsetFile(cfg.seo_dir, src.group_id, src.topic).read() if cfg.seo_dir else None
    table_offsets = None
    try:
        from tidelake.table import Table
        table_offsets = offsets_from_app_state(Table.open(cfg.sink.table).app_state(cfg.app_id))
    except Exception:  # no table yet (or no table module): nothing stored there
        table_offsets = None
    progress = {"exactly-once": table_offsets, "seo": gt}.get(cfg.offsets, committed) or {}
    out = RichTable(title=f"{cfg.app_id} ({cfg.offsets})")
    for col in ("PARTITION", "LOG-START", "GROUP-OFFSET", "GTOFFSET", "TABLE-OFFSET", "LOG-END-OFFSET", "LAG"):
        out.add_column(col, justify="right")
    for p in partitions:
        def show(d):
            return "-" if not d or p not in d else str(d[p])
        lag = latest[p] - progress[p] if p in progress else latest[p] - earliest[p]
        out.add_row(str(p), str(earliest[p]), show(committed), show(gt), show(table_offsets), str(latest[p]),
                    str(lag))
    Console().print(out)


EXAMPLE_YAML = """\
# tidelake pipeline: Kafka topic -> PySpark -> tidelake table.   Run: tidelake pipeline run THIS.yaml [--once]
source:
  bootstrap_servers: 127.0.0.1:9092
  topic: orders
  group_id: orders-pipeline        # the group whose offsets (and lag) the broker shows
  max_rate_per_partition: 1000     # records/s/partition; a batch reads at most rate x interval per partition
  batch_interval: 2s               # DStream batch interval (500ms, 2s, 1m)
  # reader: auto                   # auto | datasource (format "tidelake-kafka") | direct (confluent-kafka)
  # kafka: {isolation.level: read_committed}
offsets: exactly-once              # auto | commit-after | seo | exactly-once
# commit: async                    # commit-after only: async (Spark's commitAsync) | sync
seo_dir: ./gtoffset                # seo only: <seo_dir>/<group_id>/<topic>/gtoffset
sink:
  table: ./orders-table            # created if absent
  format: debezium-json            # debezium-json | json
  mode: upsert                     # upsert | append (json only)
  primary_key: [id]
  schema: "id long, amount long"   # Spark DDL
  buckets: 4                       # write.bucket.num
  # properties: {compaction.commit.num: "20"}
# spark: {master: "local[2]", conf: {spark.driver.memory: 1g}}
"""


@pipeline.command()
def example() -> None:
    """Print a commented example PIPELINE.yaml."""
    click.echo(EXAMPLE_YAML, nl=False)
