"""Real clients over every security protocol: confluent-kafka (librdkafka), kafka-python and aiokafka
produce and consume with a group over SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL with PLAIN and both
SCRAM mechanisms; a wrong password or an untrusted certificate is refused; Metadata advertises the
listener the client connected to; nothing but ApiVersions and SASL is served before login."""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from security_fixtures import (Login, add_scram_user, aiokafka_config, confluent_config, kafka_python_config,
                               secured_broker)
from tls_certs import make_pki

LOGINS = [
    Login("SSL"),
    Login("MTLS", cert=True),
    Login("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    Login("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
    Login("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
    Login("SASL_SSL", "PLAIN", "admin", "admin-secret"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("security")
    pki = make_pki(d / "pki")
    with secured_broker(d / "data", pki) as b:
        add_scram_user(b, "bob", "bob-secret")
        yield b, pki


def _values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def run_confluent(b, pki, login: Login, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    conf = confluent_config(b, pki, login)
    p = Producer(conf)
    failures = []
    for v in _values(5, topic):
        p.produce(topic, v, on_delivery=lambda err, _m: err and failures.append(err))
    assert p.flush(30) == 0 and not failures, failures
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


def run_kafka_python(b, pki, login: Login, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    conf = kafka_python_config(b, pki, login)
    p = KafkaProducer(**conf, request_timeout_ms=30000)
    for f in [p.send(topic, v) for v in _values(5, topic)]:
        f.get(30)
    p.close()
    c = KafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=20000)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 5:
            break
    c.commit()
    c.close()
    return got


def run_aiokafka(b, pki, login: Login, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        conf = aiokafka_config(b, pki, login)
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for v in _values(5, topic):
                await p.send_and_wait(topic, v)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest")
        await c.start()
        got = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < 5 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                got.extend(m.value for msgs in batch.values() for m in msgs)
            await c.commit()
        finally:
            await c.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), 120))


CLIENTS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


@pytest.mark.parametrize("login", LOGINS, ids=str)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_and_consume_with_a_group(env, client, login):
    b, pki = env
    topic = f"{client}-{login}".replace("_", "-").lower()
    assert sorted(CLIENTS[client](b, pki, login, topic)) == sorted(_values(5, topic))


def test_wrong_passwords_and_untrusted_certificates_are_refused(env, caplog):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    b, pki = env
    caplog.set_level("INFO", logger="tidelake.broker.sasl")
    for login in [Login("SASL_SSL", "SCRAM-SHA-512", "bob", "wrong"), Login("SASL_PLAINTEXT", "PLAIN", "alice", "x"),
                  Login("SASL_PLAINTEXT", "SCRAM-SHA-256", "nobody", "x")]:
        errors = []
        p = Producer({**confluent_config(b, pki, login), "error_cb": errors.append})
        p.produce("refused", b"v")
        assert p.flush(3) == 1  # never delivered
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        caplog.clear()
        with pytest.raises(KafkaTimeoutError):  # kafka-python retries the login until its deadline
            KafkaProducer(**kafka_python_config(b, pki, login), max_block_ms=2000,
                          api_version=(2, 5)).send("refused", b"v").get(2)
        assert any("authentication of 127.0.0.1" in r.getMessage() and "failed" in r.getMessage()
                   for r in caplog.records)
    # mTLS listener: no client certificate, then a client that does not trust the broker's CA
    for conf in [{**confluent_config(b, pki, Login("MTLS"))},
                 {**confluent_config(b, pki, Login("SSL")), "ssl.ca.location": str(pki.other_ca)}]:
        errors = []
        p = Producer({**conf, "error_cb": errors.append})
        p.produce("refused", b"v")
        assert p.flush(3) == 1
        assert errors


def test_metadata_advertises_the_listener_connected_to(env):
    from confluent_kafka.admin import AdminClient
    b, pki = env
    for login in [Login("PLAINTEXT"), Login("SASL_SSL", "PLAIN", "admin", "admin-secret"), Login("SSL")]:
        md = AdminClient(confluent_config(b, pki, login)).list_topics(timeout=20)
        assert [(br.host, br.port) for br in md.brokers.values()] == [("127.0.0.1", b.broker.ports[login.listener])]


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    client_id = b"raw"
    head = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    return struct.pack(">i", len(head) + len(body)) + head + body


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True


def test_nothing_but_api_versions_and_sasl_before_login(env):
    b, _ = env
    port = b.broker.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(18, 0))  # ApiVersions is answered
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 0
        s.recv(size)
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata before login: the connection is closed
        assert _closed(s)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(36, 1, struct.pack(">i", 0)))  # SaslAuthenticate before SaslHandshake
        assert _closed(s)
    # the broker still serves
    from confluent_kafka.admin import AdminClient
    assert AdminClient({"bootstrap.servers": b.bootstrap_for("PLAINTEXT")}).list_topics(timeout=10).brokers


def test_sasl_handshake_v0_with_raw_plain_token(env):
    """Old clients: SaslHandshake v0, then the PLAIN token as a bare size-prefixed frame."""
    b, _ = env
    with socket.create_connection(("127.0.0.1", b.broker.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(_frame(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        size = struct.unpack(">i", s.recv(4))[0]
        body = s.recv(size)
        assert struct.unpack(">ih", body[:6]) == (7, 0)  # correlation id, no error
        token = b"\x00alice\x00alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(4) == b"\x00\x00\x00\x00"  # an empty server token: authenticated
        s.sendall(_frame(3, 1, struct.pack(">i", -1)))  # now Metadata is served
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 4


@pytest.mark.parametrize("login", [Login("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"), Login("MTLS", cert=True)],
                         ids=str)
def test_aiokafka_and_kafka_python_administer(env, login):
    """The Python clients' admin APIs over a secured listener: create, list, describe and delete a topic."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic as AioNewTopic
    from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic
    b, pki = env
    name = f"admin-{login}".replace("_", "-").lower()

    async def aio() -> tuple[bool, list]:
        admin = AIOKafkaAdminClient(**aiokafka_config(b, pki, login))
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic(f"{name}-aio", 2, 1)])
            listed = f"{name}-aio" in await admin.list_topics()
            described = await admin.describe_topics([f"{name}-aio"])
            await admin.delete_topics([f"{name}-aio"])
            return listed, described
        finally:
            await admin.close()
    listed, described = asyncio.run(asyncio.wait_for(aio(), 120))
    assert listed and len(described[0]["partitions"]) == 2
    kp = KafkaAdminClient(**kafka_python_config(b, pki, login))
    try:
        kp.create_topics([KpNewTopic(f"{name}-kp", 3, 1)])
        assert f"{name}-kp" in kp.list_topics()
        assert len(kp.describe_topics([f"{name}-kp"])[0]["partitions"]) == 3
        kp.delete_topics([f"{name}-kp"])
    finally:
        kp.close()
