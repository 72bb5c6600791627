"""The Kafka port: the process's listeners, one connection per client, the frames it receives and sends.

Why a package of its own: it is the network edge, above the handlers it dispatches to and beside the HTTP
port (kafkacompat.http); the composition root (kafkacompat.broker.cluster) and the services below know
nothing of sockets.
"""
