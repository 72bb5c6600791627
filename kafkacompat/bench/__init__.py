"""`kafkacompat bench`: throughput, latency and broker cost, side by side with a peer.

Brokers run as subprocesses (so the librdkafka client in this process and
the broker use separate cores); each cell of workloads gets a fresh broker
so CPU seconds and peak RSS belong to that cell alone.
"""
