"""kwire: the Apache Kafka wire protocol, read and written from the message specs."""
__version__ = "0.1.0"
