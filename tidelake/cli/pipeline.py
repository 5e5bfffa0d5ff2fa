"""``tidelake pipeline run|status|reset|example|validate|serve|graph``: the pipelines of YAML configs.

A config reads a Kafka topic (``source: {bootstrap_servers, topic, group_id}``) or a table (``source: {table:
PATH}`` with a Spark SQL ``transform:``); ``serve DIR`` runs a directory's pipelines as one graph, ``graph DIR``
prints it with each stage's lag and freshness, ``validate`` checks files (and a directory's graph) without Spark.

Every command that talks to the broker first checks, within ``--timeout``, that it answers, so a down
broker is one error line rather than a Spark start-up followed by retries. ``reset`` moves the pipeline's
progress wherever its offset mode keeps it: the table (exactly-once: a commit with the next batch id and
the new offsets, so a running instance of the old position is fenced), the gtoffset file (seo) or the
broker group (auto, commit-after).
"""
from __future__ import annotations

import logging
import sys

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.health import live_option, report_health, url_option
from tidelake.cli.kafka_client import DEFAULT_TIMEOUT_S, BrokerConnection, debug_enabled
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.cli.progress import ProgressBar, stderr_is_terminal
from tidelake.cli.signals import on_stop_signals
from tidelake.cli.values import TimestampMs

config_argument = click.argument("config", type=click.Path(exists=True, dir_okay=False))
timeout_option = click.option("--timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT_S,
                              show_default=True, envvar="TIDELAKE_TIMEOUT", metavar="SECONDS",
                              help="Give up when the broker does not answer within this long.")


def _load(config: str):
    """The validated config (a malformed file or value is one error line naming the file)."""
    from tidelake.spark.pipeline_yaml import load_pipeline_yaml
    return load_pipeline_yaml(config)  # its PipelineConfigError (a ValueError) is one line: file:line: ...


def _hold_lock(cfg, config_file: str):
    """This process becomes the one running the pipeline, or one error line naming the one that is."""
    from tidelake.spark.pipeline_lock import PipelineLock, PipelineRunning
    try:
        return PipelineLock(cfg, config_file).acquire()
    except PipelineRunning as e:
        raise CliError(str(e)) from None


def _connection(cfg, timeout: float) -> BrokerConnection:
    return BrokerConnection(cfg.source.bootstrap_servers, timeout, debug_enabled())


def _check_broker(cfg, timeout: float) -> None:
    """The source broker answers and has the topic, or one error line within ``timeout``."""
    conn = _connection(cfg, timeout)
    admin = conn.admin()
    meta = conn.reachable(admin).topics.get(cfg.source.topic)  # all topics: asking for one may create it
    if meta is None or meta.error is not None:
        raise CliError(f"source topic {cfg.source.topic} is not available at {cfg.source.bootstrap_servers}: "
                       f"{meta.error.str() if meta is not None else 'unknown topic'}")


@click.group(cls=CommandGroup)
def pipeline() -> None:
    """Kafka topic -> PySpark -> tidelake table, with auto / commit-after / seo / exactly-once offsets."""


@pipeline.command()
@config_argument
@click.option("--once", is_flag=True,
              help="Process what is available now (in rate-capped batches), commit, exit 0 (AvailableNow).")
@click.option("--max-batches", type=click.IntRange(min=1), default=None,
              help="Stop gracefully after this many batches (as a SIGTERM would).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings on stderr.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Serve /metrics and /health/* there while running (the config's metrics.listen).")
@timeout_option
def run(config: str, once: bool, max_batches: int | None, quiet: bool, metrics_listen: str | None,
        timeout: float) -> None:
    """Run the pipeline described by CONFIG (YAML). SIGTERM/SIGINT stop it after the current batch."""
    from tidelake.observability.server import parse_listen

    cfg = _load(config)
    if metrics_listen is not None:
        try:
            parse_listen(metrics_listen, "--metrics-listen")
        except ValueError as e:
            raise click.BadParameter(str(e).removeprefix("--metrics-listen: "), param_hint="--metrics-listen")
        cfg.metrics.listen = metrics_listen
    _logging(quiet)
    with _hold_lock(cfg, config):
        if cfg.is_table_source:
            _run_table_pipeline(cfg, once, max_batches)
        else:
            _run_kafka_pipeline(cfg, once, max_batches, timeout)


def _run_kafka_pipeline(cfg, once: bool, max_batches: int | None, timeout: float) -> None:
    from tidelake.spark.runner import Pipeline, TaskFailed
    _check_broker(cfg, timeout)
    p = Pipeline(cfg, task_failure_logs=debug_enabled())
    _stop_on_signals(p)
    with ProgressBar(f"{cfg.source.topic} -> table", 0, enabled=once and stderr_is_terminal()) as bar:
        try:
            summary = p.run(once=once, max_batches=max_batches,
                            progress=lambda done, total: bar.update(done, total))
        except TaskFailed as e:  # its one line; --debug prints the Spark stacks it came with
            raise CliError(str(e)) from e
    skipped = (f" ({summary.skipped} not change events, {summary.dead_lettered} of them dead-lettered)"
               if summary.dead_lettered else f" ({summary.skipped} not change events, skipped)" if summary.skipped
               else "")
    click.echo(f"{summary.mode}: {len(summary.batches)} batches, {summary.records} records{skipped}, "
               f"offsets {summary.start_offsets} -> {summary.end_offsets} ({summary.stopped_by})")


def _logging(quiet: bool) -> None:
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.DEBUG if debug_enabled() else logging.WARNING)
    # librdkafka's own lines (FAIL ... Connection refused when the broker goes down): with --debug only
    logging.getLogger("tidelake.pipeline.librdkafka").setLevel(
        logging.DEBUG if debug_enabled() else logging.CRITICAL + 1)


def _stop_on_signals(pipeline) -> None:
    """SIGTERM/SIGINT (cli/signals.py): the first stops ``pipeline`` (a Pipeline, TablePipeline or
    PipelineServer) after its current batch, a second aborts it. Spark is started first: creating a SparkContext
    installs pyspark's own SIGINT handler (cancel every job, raise KeyboardInterrupt), which would otherwise
    replace this one."""
    from tidelake.spark.runner import abort
    spark = pipeline.spark()
    on_stop_signals(pipeline.stop, lambda: abort(spark), stopping="stopping after the current batch")


def _run_table_pipeline(cfg, once: bool, max_batches: int | None) -> None:
    from tidelake.spark.table_pipeline import TablePipeline
    p = TablePipeline(cfg)
    p.plan()   # a transform that cannot be incremental is refused before Spark starts
    _stop_on_signals(p)
    summary = p.run(once=once, max_batches=max_batches)
    last = summary.steps[-1] if summary.steps else None
    click.echo(f"{cfg.name}: {len(summary.steps)} steps" + (f", upstream version {last.to_version} -> sink version "
                                                            f"{last.sink_version}" if last else "")
               + f" ({summary.stopped_by})")


@pipeline.command()
@click.argument("path", type=click.Path(exists=True))
def validate(path: str) -> None:
    """Check a pipeline file, or every file of a directory and their graph (no cycle, one writer per table),
    without starting Spark: a table transform that cannot be maintained incrementally is refused with the
    reason unless it says refresh: full. Each table stage is followed by how it is maintained: the state it
    keeps and what makes it recompute from the upstream's snapshot."""
    import os

    from tidelake.spark.pipeline_graph import PipelineGraph, Stage
    from tidelake.spark.stage_maintenance import describe_maintenance
    from tidelake.spark.transform_plan import TransformError, plan_transform
    from tidelake.table import Table, TableNotFound
    if os.path.isdir(path):
        graph = PipelineGraph.load(path)
        stages = graph.stages
    else:
        cfg = _load(path)
        stages = [Stage(cfg.name, os.path.basename(path), cfg)]
        graph = None
    for stage in stages:
        cfg = stage.config
        if not cfg.is_table_source:
            click.echo(f"{stage.file}: ok (topic {cfg.source.topic} -> {stage.name}, {cfg.offsets})")
            continue
        try:
            key = Table.open(cfg.source.table).primary_key
        except TableNotFound:
            key = []   # not created yet (its stage has not run): a row-wise transform is checked at run time
        try:
            plan = plan_transform(cfg.transform, key)
        except TransformError as e:
            raise CliError(f"{stage.file}: {e}")
        if plan.incremental and cfg.refresh == "incremental":
            click.echo(f"{stage.file}: ok ({stage.upstream_label} -> {stage.name}, incremental {plan.kind})")
        elif cfg.refresh == "full":
            click.echo(f"{stage.file}: ok ({stage.upstream_label} -> {stage.name}, refresh: full)")
        else:
            raise CliError(f"{stage.file}: transform cannot be maintained incrementally: {plan.reason} (set "
                           f"refresh: full to re-run it over the snapshot instead)")
        for what, how in describe_maintenance(plan, cfg.refresh, cfg.state.extremes.kept):
            click.echo(f"  {what}: {how}")
    if graph is not None:
        click.echo("order: " + " -> ".join(s.name for s in graph.stages))


@pipeline.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="Only warnings on stderr.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Serve /metrics (per-stage lag and freshness) and /health/* there while running.")
@click.option("--max-passes", type=click.IntRange(min=1), default=None, hidden=True)
def serve(directory: str, quiet: bool, metrics_listen: str | None, max_passes: int | None) -> None:
    """Run every pipeline in DIRECTORY in one process sharing one Spark session, each stage in a thread of its
    own: a Kafka stage continuously, a table stage as soon as its upstream commits. SIGTERM/SIGINT stop every
    stage after its current batch."""
    import contextlib
    import os

    from tidelake.spark.pipeline_graph import PipelineGraph
    graph = PipelineGraph.load(directory)
    with contextlib.ExitStack() as locks:
        for stage in graph.stages:
            locks.enter_context(_hold_lock(stage.config, os.path.join(directory, stage.file)))
        _serve(graph, quiet, metrics_listen, max_passes)


def _serve(graph, quiet: bool, metrics_listen: str | None, max_passes: int | None) -> None:
    from tidelake.spark.pipeline_server import PipelineServer
    for stage in graph.stages:
        if not stage.config.is_table_source:
            _check_broker(stage.config, DEFAULT_TIMEOUT_S)
    _logging(quiet)
    server = PipelineServer(graph)
    for stage in graph.stages:   # what can be checked now (a stage whose upstream is not created yet: later)
        runner = server.runner(stage) if stage.config.is_table_source else None
        if runner is not None and runner.upstream_exists():
            runner.plan()
    _stop_on_signals(server)
    observer = None
    if metrics_listen is not None:
        from prometheus_client import CollectorRegistry

        from tidelake.observability.server import MetricsServer, parse_listen
        from tidelake.observability.stage_collector import StageCollector
        host, port = parse_listen(metrics_listen, "--metrics-listen")
        registry = CollectorRegistry()
        registry.register(StageCollector(server.statuses))
        observer = MetricsServer(host, port, registry)
        observer.start()
    try:
        summary = server.serve(max_passes=max_passes)
    finally:
        if observer is not None:
            observer.stop()
    passes = f", {summary.passes} passes" if summary.passes else ""   # (passes: --max-passes only)
    click.echo(f"served {len(graph.stages)} pipelines{passes}: "
               + ", ".join(f"{n} {c}" for n, c in summary.runs.items()) + f" ({summary.stopped_by})")


@pipeline.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@timeout_option
@json_option
def graph(directory: str, timeout: float, as_json: bool) -> None:
    """The pipelines of DIRECTORY as a graph in dependency order: each stage's upstream, the position it
    consumed, its lag (table versions, or records for a Kafka stage), lag in seconds and freshness."""
    from tidelake.spark.pipeline_graph import PipelineGraph, kafka_stage_status, table_stage_status
    g = PipelineGraph.load(directory)
    statuses = [table_stage_status(s) if s.config.is_table_source else
                kafka_stage_status(s, _connection(s.config, timeout).config(s.config.source.kafka), timeout)
                for s in g.stages]
    if as_json:
        print_json({"stages": [{**st.as_dict(), "reads": g.upstreams[st.name]} for st in statuses]})
        return

    def seconds(v):
        return "-" if v is None else f"{v:.1f}s"
    headers = ("STAGE", "UPSTREAM", "UPSTREAM-POSITION", "CONSUMED", "LAG", "LAG-SECONDS", "FRESHNESS",
               "SINK-VERSION")
    rows = [(("  " * _depth(g, st.name)) + st.name, st.upstream, st.upstream_position, st.consumed,
             st.lag if not st.error else st.error, seconds(st.lag_seconds), seconds(st.freshness_seconds),
             st.sink_version) for st in statuses]
    print_rows(headers, rows, title=f"pipelines in {directory}", right=headers[2:])


def _depth(g, name: str) -> int:
    ups = g.upstreams[name]
    return 1 + max(_depth(g, u) for u in ups) if ups else 0


@pipeline.command()
@url_option
@live_option
@click.option("--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True, metavar="SECONDS")
def health(url: str, live: bool, timeout: float) -> None:
    """Whether a running pipeline is ready (its last batch committed within metrics.ready_intervals batch
    intervals), read from its metrics listener: one line; exit 0 when ready, 1 when not."""
    report_health(url, live, timeout)


def _positions(cfg, timeout: float):
    """The pipeline's positions (broker, gtoffset file, table), after checking the broker answers."""
    from tidelake.spark.pipeline_status import positions
    _check_broker(cfg, timeout)
    return positions(cfg, _connection(cfg, timeout).config(), timeout)


@pipeline.command()
@config_argument
@timeout_option
@json_option
def status(config: str, timeout: float, as_json: bool) -> None:
    """Where the pipeline is: per partition the broker group's, the gtoffset file's and the table's offsets,
    the log end and the lag (measured from the offsets of the pipeline's mode)."""
    from tidelake.spark.pipeline_status import bad_records, table_state
    cfg = _load(config)
    rows = _positions(cfg, timeout).rows(cfg.offsets)
    errors = bad_records(cfg, table_state(cfg)[0])
    if as_json:
        print_json({"app_id": cfg.app_id, "offsets": cfg.offsets, "topic": cfg.source.topic,
                    "group": cfg.source.group_id, "partitions": rows, "bad_records": errors})
        return
    keys = ("partition", "log_start_offset", "group_offset", "gtoffset", "table_offset", "log_end_offset", "lag")
    headers = ("PARTITION", "LOG-START", "GROUP-OFFSET", "GTOFFSET", "TABLE-OFFSET", "LOG-END-OFFSET", "LAG")
    print_rows(headers, [[r[k] for k in keys] for r in rows], title=f"{cfg.app_id} ({cfg.offsets})", right=headers)
    if cfg.offsets == "exactly-once":   # the counts are kept in the table's commits
        dlq = f", {errors['dead_lettered']} dead-lettered to {cfg.dead_letter_topic}" if cfg.dead_letter_topic else ""
        click.echo(f"bad records (on_error: {cfg.on_error}): {errors['skipped']} left out{dlq}")


@pipeline.command()
@config_argument
@click.option("--partition", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Only these partitions (repeatable; default all).")
@click.option("--to-earliest", "scenario", flag_value="earliest", help="The log start offset.")
@click.option("--to-latest", "scenario", flag_value="latest", help="The log end offset (skip everything).")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="This offset (clamped to the log).")
@click.option("--to-datetime", type=TimestampMs(), default=None,
              help="The first offset at or after this time (ISO-8601 or epoch ms).")
@click.option("--shift-by", type=int, default=None, help="The pipeline's offset plus N (negative: re-read).")
@click.option("--dry-run", "mode", flag_value="dry-run", default=True, help="Only print the plan (the default).")
@click.option("--execute", "mode", flag_value="execute", help="Store the new offsets.")
@timeout_option
@json_option
def reset(config: str, partitions: tuple[int, ...], scenario: str | None, to_offset: int | None,
          to_datetime: int | None, shift_by: int | None, mode: str, timeout: float, as_json: bool) -> None:
    """Move the pipeline's offsets (where its offset mode keeps them); stop the pipeline first."""
    from confluent_kafka import TopicPartition

    from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile
    from tidelake.spark.pipeline_status import progress_store, table_state
    chosen = [v for v in (scenario, to_offset, to_datetime, shift_by) if v is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                               "--shift-by")
    cfg = _load(config)
    pos = _positions(cfg, timeout)
    all_parts, earliest, latest = pos.partitions, pos.earliest, pos.latest
    missing = sorted(set(partitions) - set(all_parts))
    if missing:
        raise CliError(f"topic {cfg.source.topic} has no partition {', '.join(map(str, missing))}")
    current = pos.progress(cfg.offsets)
    parts = sorted(partitions) or all_parts

    def clamp(p: int, o: int) -> int:
        return min(max(o, earliest[p]), latest[p])

    if scenario == "earliest":
        target = {p: earliest[p] for p in parts}
    elif scenario == "latest":
        target = {p: latest[p] for p in parts}
    elif to_offset is not None:
        target = {p: clamp(p, to_offset) for p in parts}
    elif shift_by is not None:
        absent = [p for p in parts if p not in current]
        if absent:
            raise CliError(f"--shift-by needs stored offsets; the pipeline has none for partition "
                           f"{', '.join(map(str, absent))}")
        target = {p: clamp(p, current[p] + shift_by) for p in parts}
    else:
        conn = _connection(cfg, timeout)
        consumer, _ = conn.consumer({"group.id": cfg.source.group_id, **cfg.source.kafka})
        try:
            found = consumer.offsets_for_times([TopicPartition(cfg.source.topic, p, to_datetime) for p in parts],
                                               timeout=timeout)
        finally:
            consumer.close()
        target = {tp.partition: tp.offset if tp.offset >= 0 else latest[tp.partition] for tp in found}
    store = progress_store(cfg.offsets)
    rows = [{"partition": p, "current_offset": current.get(p), "new_offset": target[p]} for p in parts]
    if mode == "execute":
        new = {**current, **target}
        if store == "table":
            from tidelake.table import Table
            state, _ = table_state(cfg)
            if state is None:
                raise CliError(f"table {cfg.sink.table} holds no offsets of {cfg.app_id} yet: nothing to reset")
            Table.open(cfg.sink.table, storage_options=cfg.sink.storage_options or None).commit_staged(
                [], app_id=cfg.app_id, batch_id=state["batch_id"] + 1,
                app_extra={"offsets": {str(p): o for p, o in sorted(new.items())}, "topic": cfg.source.topic,
                           "reset": True})
        elif store == "gtoffset":
            ClientOffsetFile(cfg.seo_dir, cfg.source.group_id, cfg.source.topic).write(new)
        else:
            src = cfg.source
            with BrokerOffsets(src.bootstrap_servers, src.topic, src.group_id,
                               _connection(cfg, timeout).config(src.kafka), timeout=timeout) as broker:
                broker.commit(target)
    if as_json:
        print_json({"app_id": cfg.app_id, "store": store, "executed": mode == "execute", "offsets": rows})
        return
    print_rows(("PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
               [(r["partition"], r["current_offset"], r["new_offset"]) for r in rows],
               title=f"{cfg.app_id} ({cfg.offsets}: offsets in the {store})",
               right=("PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"))
    if mode != "execute":
        click.echo("Dry run: nothing changed; add --execute to store these offsets.", err=True)


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
  table: ./orders-table            # created if absent; or s3://bucket/prefix
  # storage_options: {endpoint: "http://127.0.0.1:9000", region: us-east-1}   # s3:// (else AWS_* env vars)
  format: debezium-json            # debezium-json | json; with schema_registry: avro | protobuf | json-schema
                                   # (and debezium-avro | debezium-protobuf | debezium-json-schema)
  mode: upsert                     # upsert | append (json only)
  primary_key: [id]
  schema: "id long, amount long"   # Spark DDL
  buckets: 4                       # write.bucket.num
  # properties: {compaction.commit.num: "20"}
  # schema_evolution: none         # none | add-columns (schema columns the table lacks are added, nullable)
# on_error: fail                   # a record that is not a change event: fail | skip | dead-letter
# dead_letter_topic: orders.dlq    # dead-letter only (Kafka Connect's __connect.errors.* headers)
# security: {security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512, ...}   # Kafka client properties
# spark: {master: "local[2]", conf: {spark.driver.memory: 1g}}   # or spark://HOST:7077 (README: on a cluster)
# metrics: {listen: 127.0.0.1:9405, ready_intervals: 3}   # /metrics, /health/live, /health/ready while running
# schema_registry: {url: "http://127.0.0.1:8081", basic_auth_user_info: "user:password"}   # typed formats
"""


@pipeline.command()
def example() -> None:
    """Print a commented example PIPELINE.yaml."""
    click.echo(EXAMPLE_YAML, nl=False)
