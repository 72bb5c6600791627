"""The catalog: the topic, group, broker and logger configs, and the producers' state.

Why a package of its own: services (groups, shares, transactions, replication, security), handlers, the
console and the command line all read these; below the services, they import nothing above them.
"""
