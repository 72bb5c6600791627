"""Runnable demonstrations of the product: `kafkacompat demo oilrig`."""
