"""kwire: the Apache Kafka wire protocol, read and written from the message specs."""
__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it from here)
