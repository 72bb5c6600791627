"""The schema registry's domain: formats, compatibility, ids, and its records kept in the streams (no HTTP here)."""
