"""The demo's broker part runs end to end (the full pipeline demo is `make demo`; its pieces are tested in
test_pipeline_*, test_spark_* and test_table_*)."""
from tidelake.demo import OrdersGenerator, run_broker_demo


def test_broker_demo_produces_and_consumes_everything(tmp_path):
    assert run_broker_demo(tmp_path, records=600, partitions=3) == {"produced": 600, "consumed": 600}


def test_orders_generator_oracle_follows_its_events():
    gen = OrdersGenerator("unused:0", events=0, seconds=0, seed=3)
    next_id, live = 1, {}
    for _ in range(500):
        key, event, next_id = gen._event(next_id)
        if event["op"] == "d":
            assert event["before"]["id"] == key and key not in gen.state
            live.pop(key)
        else:
            assert event["after"]["id"] == key
            live[key] = event["after"]
    assert live == gen.state


def test_rerun_on_the_same_data_dir_is_refused_in_one_line_unless_reset(tmp_path):
    import subprocess
    import sys
    run_broker_demo(tmp_path, records=10, partitions=1)
    again = subprocess.run([sys.executable, "-m", "tidelake.demo", "--broker-only", "--data-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"tidelake demo: error: {tmp_path} holds a previous demo run; "
        "pass --reset to delete it first, or choose another --data-dir"]
    reset = subprocess.run([sys.executable, "-m", "tidelake.demo", "--broker-only", "--reset",
                            "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stderr
    assert "Traceback" not in reset.stderr
