"""Stream, topic and cursor operations: what the admin CLI (through the StreamAdmin request), the web console
and handlers share.

Why a package of its own: the operations authorize through security, run replication's stream commands and
log through the composition root's Cluster, so they sit above the root and below both ports (the Kafka
handler and the console call them), instead of the console importing a Kafka handler.
"""
