"""The composition root: `Cluster` (cluster.py) builds and holds every service, with the broker-wide pieces it
owns (client quotas, request statistics, feature levels, the admin log).

Services below import none of it; they are handed narrow views (typing.Protocol) of the Cluster instead.
"""
