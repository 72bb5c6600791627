"""The broker process: the composition root (Cluster) and the modules it alone assembles."""
