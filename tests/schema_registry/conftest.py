from schema_registry_fixtures import registry_broker, schema_registry, shared_registry  # noqa: F401  (fixtures)
