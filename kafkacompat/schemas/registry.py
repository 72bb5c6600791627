"""Confluent Schema Registry semantics over the stream-kept log: subjects, versions, ids, compatibility, modes.

Ids: a schema's id is derived from its content (type, canonical text and
references, 31 bits of SHA-256), so the same schema has the same id under
every subject, in every stream and in every cluster a stream is replicated
to, with no counter to agree on. The rare id already taken by another
schema moves to the next free one (that choice is local: docs/schemas.md).
In IMPORT mode the client names the id. Errors are RegistryError, carrying
Confluent's HTTP status and error code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from . import formats
from .log import SchemaHost, SchemaLog, stream_of

COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_COMPATIBILITY, DEFAULT_MODE = "BACKWARD", "READWRITE"
MAX_SCHEMA_BYTES = 512 << 10  # half the HTTP server's request bound and of a 1 MiB _schemas record (docs/schemas.md)
GLOBAL = ""  # the subject of the global config and mode records


class RegistryError(Exception):
    """An answer of Confluent's shape: HTTP status, error_code, message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: Any) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


@dataclasses.dataclass(frozen=True)
class Version:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[dict[str, Any], ...]
    deleted: bool = False

    def record(self) -> dict[str, Any]:
        return {"subject": self.subject, "version": self.version, "id": self.id, "schemaType": self.schema_type,
                "schema": self.schema, "references": list(self.references), "deleted": self.deleted}

    def answer(self) -> dict[str, Any]:
        """As Confluent answers a version: schemaType left out for Avro."""
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id,
                               "schema": self.schema}
        if self.schema_type != formats.AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = list(self.references)
        return out


T = TypeVar("T")


def _alone(change: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """One change at a time, decided on the state read under the lock: two registrations cannot take one version.

    The answer waits until the change is durable, outside the lock, so changes at once share an fsync.
    """
    @functools.wraps(change)
    async def run(self: "Registry", *args: Any) -> T:
        async with self._changing:
            await self.refresh()
            try:
                result = await change(self, *args)
            finally:
                waits = self.log.written()
        await self.log.durable(waits)
        return result
    return run


def schema_key(subject: str, version: int) -> str:
    return f"schema/{subject}/{version}"


def content_id(schema_type: str, schema: str, references: tuple[dict[str, Any], ...]) -> int:
    digest = hashlib.sha256(json.dumps([schema_type, schema, list(references)]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF or 1


class Registry:
    """The registry of one broker: reads the log before every answer, writes through it."""

    def __init__(self, cluster: SchemaHost) -> None:
        self.cluster = cluster
        self.log = SchemaLog(cluster)
        self._index: tuple[int, dict[int, frozenset[str]]] = (-1, {})
        self._changing = asyncio.Lock()
        self._names: tuple[int, dict[int, str | None]] = (-1, {})

    def record_name(self, schema_id: int) -> str | None:
        """The record name of a schema (RecordNameStrategy's subject), kept until the log moves."""
        generation, names = self._names
        if generation != self.log.generation:
            names = {}
            self._names = (self.log.generation, names)
        if schema_id not in names:
            try:
                found = self.by_id(schema_id)
                names[schema_id] = formats.record_name(found.schema_type, found.schema,
                                                       self.referenced(found.references))
            except (RegistryError, formats.InvalidSchema):
                names[schema_id] = None
        return names[schema_id]

    def subjects_by_id(self) -> dict[int, frozenset[str]]:
        """id -> the subjects with a live (not soft-deleted) version of it, kept until the log moves."""
        generation, index = self._index
        if generation != self.log.generation:
            found: dict[int, set[str]] = {}
            for version in self._versions():
                if not version.deleted:
                    found.setdefault(version.id, set()).add(version.subject)
            index = {schema_id: frozenset(subjects) for schema_id, subjects in found.items()}
            self._index = (self.log.generation, index)
        return index

    # --- reading the state ---------------------------------------------------------------------------------

    async def refresh(self) -> None:
        await self.log.catch_up()

    def _versions(self, subject: str | None = None) -> list[Version]:
        out = []
        for key, value in self.log.records.items():
            if key.startswith("schema/") and (subject is None or value["subject"] == subject):
                out.append(Version(value["subject"], value["version"], value["id"], value["schemaType"],
                                   value["schema"], tuple(value.get("references", ())), value.get("deleted", False)))
        return sorted(out, key=lambda v: (v.subject, v.version))

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        """A subject's versions (soft-deleted ones too with `deleted`); 40401 when it has none to show."""
        found = [v for v in self._versions(subject) if deleted or not v.deleted]
        if not found:
            raise subject_not_found(subject)
        return found

    def holding(self, schema_id: int) -> list[Version]:
        """Every version (soft-deleted ones too) of every subject with this id."""
        return [v for v in self._versions() if v.id == schema_id]

    def live(self, subject: str) -> list[Version]:
        """A subject's versions not soft-deleted (empty when it has none)."""
        return [v for v in self._versions(subject) if not v.deleted]

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return sorted({v.subject for v in self._versions() if deleted or not v.deleted})

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> Version:
        live = self.versions(subject, deleted=True)
        if str(version) in ("latest", "-1"):
            shown = [v for v in live if deleted or not v.deleted]
            if not shown:
                raise subject_not_found(subject)
            return shown[-1]
        number = parse_version(version)
        for found in live:
            if found.version == number and (deleted or not found.deleted):
                return found
        raise version_not_found(version)

    def by_id(self, schema_id: int) -> Version:
        for found in self._versions():
            if found.id == schema_id:
                return found
        raise RegistryError(404, 40403, f"Schema {schema_id} not found")

    def config(self, subject: str = GLOBAL) -> str | None:
        record = self.log.records.get(f"config/{subject}")
        return record["compatibilityLevel"] if record else None

    def compatibility(self, subject: str) -> str:
        return self.config(subject) or self.config() or DEFAULT_COMPATIBILITY

    def mode(self, subject: str = GLOBAL) -> str | None:
        record = self.log.records.get(f"mode/{subject}")
        return record["mode"] if record else None

    def effective_mode(self, subject: str) -> str:
        return self.mode(subject) or self.mode() or DEFAULT_MODE

    def referenced(self, references: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> dict[str, str]:
        """name -> schema text of each reference (42201 when one names no registered version)."""
        out = {}
        for ref in references:
            try:
                out[ref["name"]] = self.version(ref["subject"], ref["version"]).schema
            except (KeyError, TypeError, RegistryError):
                raise RegistryError(422, 42201, f"Invalid schema: reference {ref!r} names no registered schema") \
                    from None
        return out

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({v.id for v in self._versions() for ref in v.references
                       if ref.get("subject") == subject and ref.get("version") == version})

    # --- checking a candidate -------------------------------------------------------------------------------

    def candidate(self, body: Any) -> tuple[str, str, tuple[dict[str, Any], ...]]:
        """(type, canonical text, references) of a request body, or 42201."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the body needs a \"schema\" string")
        if len(body["schema"].encode()) > MAX_SCHEMA_BYTES:
            raise RegistryError(422, 42201, f"Invalid schema: larger than {MAX_SCHEMA_BYTES} bytes")
        schema_type = body.get("schemaType") or formats.AVRO
        references = body.get("references") or []
        if schema_type not in formats.TYPES or not isinstance(references, list):
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
        try:
            text = formats.canonical(schema_type, body["schema"], self.referenced(references))
        except formats.InvalidSchema as exc:
            raise RegistryError(422, 42201, str(exc)) from None
        return schema_type, text, tuple(
            {"name": r["name"], "subject": r["subject"], "version": r["version"]} for r in references)

    def problems(self, level: str, schema_type: str, text: str,
                 references: tuple[dict[str, Any], ...], against: list[Version]) -> list[str]:
        """Why the candidate breaks `level` against the given versions (the latest only unless transitive)."""
        if level == "NONE" or not against:
            return []
        older = against if level.endswith("_TRANSITIVE") else against[-1:]
        refs = self.referenced(references)
        found: list[str] = []
        for old in older:
            if old.schema_type != schema_type:
                found.append(f"version {old.version} is {old.schema_type}, not {schema_type}")
                continue
            if level.startswith(("BACKWARD", "FULL")):
                found += [f"{p} (reading version {old.version}'s data)"
                          for p in formats.incompatibilities(schema_type, text, old.schema, refs)]
            if level.startswith(("FORWARD", "FULL")):
                found += [f"{p} (version {old.version} reading new data)"
                          for p in formats.incompatibilities(schema_type, old.schema, text, refs)]
        return found

    # --- changes --------------------------------------------------------------------------------------------

    def _writable(self, subject: str) -> str:
        mode = self.effective_mode(subject)
        if mode == "READONLY":
            raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode")
        return mode

    def find(self, subject: str, schema_type: str, text: str, references: tuple[dict[str, Any], ...],
             *, deleted: bool = False) -> Version | None:
        for found in self._versions(subject):
            if (found.schema_type, found.schema, found.references) == (schema_type, text, references) and (
                    deleted or not found.deleted):
                return found
        return None

    @_alone
    async def register(self, subject: str, body: Any) -> Version:
        """POST /subjects/{subject}/versions: the existing version of the same schema, or a new one."""
        if not subject.strip() or any(ord(c) < 32 for c in subject):
            raise RegistryError(422, 42208, f"Invalid subject {subject!r}: empty or with control characters")
        mode = self._writable(subject)
        schema_type, text, references = self.candidate(body)
        given_id, given_version = body.get("id"), body.get("version")
        existing = self.find(subject, schema_type, text, references)
        if existing is not None and given_id in (None, existing.id):
            return existing
        if given_id is not None and mode != "IMPORT":
            raise RegistryError(422, 42205, "Registering with a given id needs IMPORT mode")
        live = self.live(subject)
        if mode != "IMPORT":
            problems = self.problems(self.compatibility(subject), schema_type, text, references, live)
            if problems:
                raise RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema "
                                    f"for subject \"{subject}\", details: {problems}")
        schema_id = self._id_for(schema_type, text, references, given_id)
        number = self._next_version(subject, given_version)
        version = Version(subject, number, schema_id, schema_type, text, references)
        await self._write(subject, {schema_key(subject, number): version.record()})
        return version

    def _id_for(self, schema_type: str, text: str, references: tuple[dict[str, Any], ...],
                given: Any) -> int:
        taken = {v.id: (v.schema_type, v.schema, v.references) for v in self._versions()}
        if given is not None:
            if not isinstance(given, int) or given <= 0:
                raise RegistryError(422, 42201, f"Invalid schema id {given!r}")
            if taken.get(given, (schema_type, text, references)) != (schema_type, text, references):
                raise RegistryError(422, 42207, f"Schema id {given} is already used by another schema")
            return given
        for schema_id, content in taken.items():
            if content == (schema_type, text, references):
                return schema_id
        schema_id = content_id(schema_type, text, references)
        while schema_id in taken:
            schema_id = schema_id % 0x7FFFFFFF + 1
        return schema_id

    def _next_version(self, subject: str, given: Any) -> int:
        every = [v.version for v in self._versions(subject)]
        if given is None:
            return max(every, default=0) + 1
        number = parse_version(given)
        if number in every:
            raise RegistryError(422, 42202, f"Version {number} already exists under subject {subject}")
        return number

    @_alone
    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        self._writable(subject)
        latest = str(version) in ("latest", "-1")  # a soft delete of "latest" takes the latest live version
        found = self.version(subject, version, deleted=permanent or not latest)
        if permanent and not found.deleted:
            raise RegistryError(404, 40407, f"Subject '{subject}' Version {found.version} was not deleted first "
                                "before being permanently deleted")
        if not permanent and found.deleted:
            raise RegistryError(404, 40406, f"Subject '{subject}' Version {found.version} was soft deleted. "
                                "Set permanent=true to delete permanently")
        if self.referenced_by(subject, found.version):
            raise RegistryError(422, 42206, f"One or more references exist to the schema {subject} "
                                f"version {found.version}")
        value = None if permanent else dataclasses.replace(found, deleted=True).record()
        await self._write(subject, {schema_key(subject, found.version): value})
        return found.version

    @_alone
    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        self._writable(subject)
        every = self.versions(subject, deleted=True)
        live = [v for v in every if not v.deleted]
        if permanent and live:
            raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                "permanently deleted")
        if not permanent and not live:
            raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                                "permanently")
        for found in every:
            if self.referenced_by(subject, found.version):
                raise RegistryError(422, 42206, f"One or more references exist to the schema {subject} "
                                    f"version {found.version}")
        changes: dict[str, dict[str, Any] | None] = {
            schema_key(subject, v.version): None if permanent else dataclasses.replace(v, deleted=True).record()
            for v in every}
        if permanent:
            changes.update({f"config/{subject}": None, f"mode/{subject}": None})
        await self._write(subject, changes)
        return [v.version for v in every]

    @_alone
    async def set_config(self, subject: str, body: Any) -> str:
        level = body.get("compatibility") if isinstance(body, dict) else None
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                                "forward, full, backward_transitive, forward_transitive, and full_transitive")
        await self._write(subject, {f"config/{subject}": {"compatibilityLevel": level}})
        return level

    @_alone
    async def delete_config(self, subject: str) -> str:
        level = self.config(subject)
        if level is None:
            if subject != GLOBAL:
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                    "compatibility configured")
            level = DEFAULT_COMPATIBILITY
        await self._write(subject, {f"config/{subject}": None})
        return level

    @_alone
    async def set_mode(self, subject: str, body: Any, force: bool = False) -> str:
        """PUT /mode[/{subject}]: IMPORT only where there is nothing to overwrite, unless forced (as Confluent)."""
        mode = body.get("mode") if isinstance(body, dict) else None
        if mode not in MODES:
            raise RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY and IMPORT")
        existing = self.live(subject) if subject != GLOBAL else self.subjects()
        if mode == "IMPORT" and existing and not force:
            raise RegistryError(422, 42205, "Cannot import since found existing subjects (use force=true)")
        await self._write(subject, {f"mode/{subject}": {"mode": mode}})
        return mode

    @_alone
    async def delete_mode(self, subject: str) -> str:
        mode = self.mode(subject)
        if mode is None:
            raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
        await self._write(subject, {f"mode/{subject}": None})
        return mode

    def where(self, subject: str) -> str:
        """The stream a subject's records are kept in."""
        store = self.cluster.store
        return stream_of(subject, store.default_stream, lambda path: store.get_stream(path) is not None)

    async def _write(self, subject: str, changes: dict[str, dict[str, Any] | None]) -> None:
        stream = self.cluster.store.default_stream if subject == GLOBAL else self.where(subject)
        await self.log.write(stream, changes)


_registries: "weakref.WeakKeyDictionary[SchemaHost, Registry]" = weakref.WeakKeyDictionary()


def registry_of(cluster: SchemaHost) -> Registry:
    """The one registry of a broker's cluster, shared by the HTTP routes and produce validation."""
    found = _registries.get(cluster)
    if found is None:
        found = _registries[cluster] = Registry(cluster)
    return found


def parse_version(text: Any) -> int:
    """A version number 1..2^31-1 (42202 otherwise)."""
    try:
        number = int(text)
    except (TypeError, ValueError):
        number = 0
    if not 1 <= number <= 0x7FFFFFFF or isinstance(text, bool):
        raise RegistryError(422, 42202, "The specified version '" + str(text) + "' is not a valid version id. "
                            "Allowed values are between [1, 2^31-1] and the string \"latest\"")
    return number
