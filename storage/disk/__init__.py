"""The on-disk engine: streams as directories, partitions as chains of
partitionlet files spread over volumes. See DESIGN.md for the layout.
"""
