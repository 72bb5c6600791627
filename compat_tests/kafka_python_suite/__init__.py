"""kafka-python's own integration suite, run unchanged against kafkacompat.

`sdist` fetches the test tree from the PyPI source distribution of the
installed kafka-python; `plugin` is the pytest plugin loaded into that
suite's run which points its broker fixtures at kafkacompat brokers.
"""
