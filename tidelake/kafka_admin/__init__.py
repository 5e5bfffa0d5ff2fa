"""Kafka admin requests the clients' admin APIs do not send, shared by the command line and the web console."""
