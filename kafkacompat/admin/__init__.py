"""The command line beyond `serve`: admin of streams, topics and cursors (private admin API), and
produce, consume and group commands (Kafka's protocol)."""
