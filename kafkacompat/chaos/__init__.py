"""Seeded fault campaigns in Jepsen's shape: a workload of stock clients, a nemesis, a checker.

`python -m kafkacompat.chaos --engine disk --minutes 2 --seed 7` starts a
broker as a user starts it, drives it with librdkafka producers and
consumers while the nemesis (chosen by the seed) kills, pauses, damages and
fills its store, writes every operation to a JSON-lines history, then checks
the history against what docs/operations.md promises. Modules: `history` (the
record), `workload` (the clients), `engine` (what a nemesis acts on; `disk`
is one broker on the embedded store, `cloud` three on PostgreSQL and S3,
`replication` three clusters linked in a chain or a ring, all running
`process`es), `nemesis` (the faults), `checker` (the rules; a replication
run adds `replica_checker`'s), `campaign` (one run, start to verdict), `cli`.
"""
