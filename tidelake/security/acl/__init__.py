"""Kafka's ACL model (``model.py``) and the authorizer that applies it (``authorizer.py``)."""
