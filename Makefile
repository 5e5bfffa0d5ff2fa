# Two commands do all set-up: `make demo` and `make test`. Each creates or reuses .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tidelake-installed

export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: demo test venv bench clean system-deps node-deps

# Commands the tests run (kcat: librdkafka's command-line client, in the security interop tests; chromium: the
# headless browser of the web console tests, driven by playwright without its own browser download) and Debian
# packages they need by a file they install (zookeeper: the cluster tests' ZooKeeper server).
# As root they are installed with apt; otherwise the one command to run is printed.
TEST_COMMANDS := kcat chromium
TEST_PACKAGE_FILES := zookeeper:/usr/share/java/zookeeper.jar

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m tidelake.demo

system-deps:
	@missing=""; for c in $(TEST_COMMANDS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	for pf in $(TEST_PACKAGE_FILES); do test -e "$${pf#*:}" || missing="$$missing $${pf%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q $$missing; \
	  else echo "missing:$$missing -- run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi

# The Node.js Kafka clients of tests/broker/test_node_clients.py, pinned by tests/node/package-lock.json and
# installed into tests/node/node_modules (reused while the lock file is unchanged).
NODE_DIR := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.package-lock.json

$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q nodejs npm; \
	  else echo "missing: nodejs npm (Node.js 20.19 or later) for $(NODE_DIR) -- run: sudo apt-get install -y nodejs npm"; exit 1; fi; }
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); if (a < 20 || (a === 20 && b < 19)) { console.error("Node.js 20.19 or later is needed for $(NODE_DIR), found " + process.versions.node); process.exit(1) }'
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error

node-deps: $(NODE_STAMP)

# The Spark peers of tests/spark_peer/ and benchmarks/spark_peers.py: a second venv with the PySpark of
# jvm/spark-peer/requirements.txt (not the project's 4.3.0: that file says why) and the jars of
# jvm/spark-peer/pom.xml in jvm/spark-peer/target/jars/, each reused while its pin file is unchanged.
PEER_VENV := .venv-peer
PEER_DIR := jvm/spark-peer
PEER_STAMP := $(PEER_VENV)/.peer-installed
PEER_JARS_STAMP := $(PEER_DIR)/target/.jars-copied

$(PEER_STAMP): $(PEER_DIR)/requirements.txt
	@test -x $(PEER_VENV)/bin/python || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install -q -r $(PEER_DIR)/requirements.txt
	@touch $@

$(PEER_JARS_STAMP): $(PEER_DIR)/pom.xml
	rm -rf $(PEER_DIR)/target/jars
	cd $(PEER_DIR) && mvn -q -B dependency:copy-dependencies -DoutputDirectory=target/jars -DincludeScope=runtime
	@touch $@

.PHONY: peer-venv
peer-venv: $(PEER_STAMP) $(PEER_JARS_STAMP)

# Apache Kafka's own software (jvm/kafka/pom.xml): Kafka 4.4's broker (the peer of tests/kafka_peer.py), clients,
# tools and Streams, a Connect 4.3.1 worker with connect-file and MirrorMaker 2, and Debezium's PostgreSQL connector,
# copied by Maven into build/jvm/kafka/lib/<profile>/, one classpath per profile of the pom (reused while the pom is
# unchanged); then the Java test programs of tests/java/ compiled against the Kafka 4.4 classpath into
# build/jvm/kafka/test-classes/ (again while neither changes).
JVM_KAFKA := build/jvm/kafka
JVM_KAFKA_PROFILES := kafka connect-4.3 debezium
JVM_KAFKA_STAMP := $(JVM_KAFKA)/lib/.copied
JAVA_TEST_SOURCES := $(wildcard tests/java/*.java)
JAVA_TEST_STAMP := $(JVM_KAFKA)/test-classes/.compiled

$(JVM_KAFKA_STAMP): jvm/kafka/pom.xml
	@command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q maven openjdk-17-jdk-headless; \
	  else echo "missing: maven and a JDK 17 for jvm/kafka -- run: sudo apt-get install -y maven openjdk-17-jdk-headless"; exit 1; fi; }
	rm -rf $(JVM_KAFKA)/lib
	for p in $(JVM_KAFKA_PROFILES); do \
	  mvn -q -B -Dstyle.color=never -f jvm/kafka/pom.xml -P $$p dependency:copy-dependencies -DoutputDirectory=$(abspath $(JVM_KAFKA))/lib/$$p \
	    || exit 1; done
	@touch $@

$(JAVA_TEST_STAMP): $(JVM_KAFKA_STAMP) $(JAVA_TEST_SOURCES)
	rm -rf $(JVM_KAFKA)/test-classes && mkdir -p $(JVM_KAFKA)/test-classes
	javac -nowarn -cp '$(JVM_KAFKA)/lib/kafka/*' -d $(JVM_KAFKA)/test-classes $(JAVA_TEST_SOURCES)
	@touch $@

.PHONY: jvm-deps
jvm-deps: $(JAVA_TEST_STAMP)

# Two test workers, whole files each (a module's fixtures start once): the suite mostly waits on brokers, JVMs
# and Spark, so two at a time nearly halve it on two cores. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2

test: $(STAMP) system-deps node-deps jvm-deps peer-venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
