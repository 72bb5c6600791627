"""The Kafka wire protocol as pure functions over bytes: no sockets, no files."""
