"""Authentication and transport security: listeners, TLS, SASL (PLAIN, SCRAM, OAUTHBEARER) and user credentials.

Authorization (stream permissions, Kafka ACLs) lives beside it in authorizer.py,
acls.py and permissions.py and reads the principal these modules establish.
"""
