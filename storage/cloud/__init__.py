"""The cloud engine: PostgreSQL for metadata and offsets, an S3-compatible store for data (DESIGN.md)."""
