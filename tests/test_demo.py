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
