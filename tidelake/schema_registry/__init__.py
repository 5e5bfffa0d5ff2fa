"""tidelake's schema registry: Confluent Schema Registry's REST API over a compacted ``_schemas`` topic.

``SchemaRegistryServer(RegistrySettings.load(overrides={...})).start()`` runs one in this process; the command is
``tidelake schema-registry start``; a broker with ``schema.registry.listen`` starts one beside itself.
"""
