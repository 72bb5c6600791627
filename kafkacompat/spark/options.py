"""The options of `format("kafkacompat")`, parsed once on the driver.

They follow Spark's Kafka source where it has a name for the thing
(`subscribe`, `subscribePattern`, `assign`, `startingOffsets`,
`endingOffsets`, `startingTimestamp`, `includeHeaders`,
`maxOffsetsPerTrigger`, `failOnDataLoss`), so a query moves between
`format("kafka")` and `format("kafkacompat")` by changing the format and
adding `dataDir`. `stream` + `topics` name topics the MapR way.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..topic_names import TopicNameError, canonical_name, split_name

if TYPE_CHECKING:  # the store is not imported where only options are parsed (Spark's schema worker)
    from ..storage.disk.reader import StoreReader

EARLIEST, LATEST = -2, -1


class OptionError(ValueError):
    """An option Spark users would get wrong: said in one sentence."""


@dataclasses.dataclass(frozen=True)
class TopicRef:
    """A topic as stored (stream, name) and as its rows spell it (label)."""

    stream: str
    name: str
    label: str


@dataclasses.dataclass(frozen=True)
class Options:
    volumes: tuple[str, ...]
    default_stream: str
    topics: tuple[TopicRef, ...] | None  # None: chosen by `pattern` each time
    pattern: re.Pattern[str] | None
    pattern_stream: str | None
    assign: Mapping[str, tuple[int, ...]] | None
    starting: object  # "earliest" | "latest" | {label: {partition: offset}}
    ending: object  # "latest" | {label: {partition: offset}}
    starting_timestamp: int | None
    include_headers: bool
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    read_committed: bool  # kafka.isolation.level=read_committed: stop at the LSO, skip aborted records
    # typed rows (spark/typed.py): the columns decoded through the registry, their subjects and versions
    decode: tuple[str, ...] = ()
    subjects: Mapping[str, str] = dataclasses.field(default_factory=dict)
    schema_versions: Mapping[str, int] = dataclasses.field(default_factory=dict)
    permissive: bool = False  # mode PERMISSIVE: an undecodable record gives null and an error column

    def resolve(self, reader: StoreReader) -> list[TopicRef]:
        """The topics the query reads now (a pattern picks up new topics)."""
        if self.topics is not None:
            return list(self.topics)
        streams = [self.pattern_stream] if self.pattern_stream else reader.streams()
        found = []
        for stream in streams:
            for name in sorted(reader.topics(stream)):
                label = canonical_name(stream, name, self.default_stream)
                if self.pattern.fullmatch(name if self.pattern_stream else label):
                    found.append(TopicRef(stream, name, label))
        return found


def parse_options(raw: Mapping[str, str]) -> Options:
    opts = {k.lower(): v for k, v in raw.items()}
    data_dir = opts.get("datadir")
    if not data_dir:
        raise OptionError("option 'dataDir' is required: the broker's data directories, comma-separated")
    default_stream = opts.get("defaultstream", "/default")
    stream = opts.get("stream")
    chosen = [k for k in ("topics", "subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        raise OptionError("give exactly one of 'topics' (with 'stream'), 'subscribe', 'subscribePattern', 'assign'")
    topics: tuple[TopicRef, ...] | None = None
    pattern = None
    assign = None
    if "topics" in opts:
        names = _names(opts["topics"])
        base = stream or default_stream
        topics = tuple(TopicRef(base, n, canonical_name(base, n, default_stream)) for n in names)
    elif "subscribe" in opts:
        topics = tuple(_ref(n, default_stream) for n in _names(opts["subscribe"]))
    elif "assign" in opts:
        try:
            parsed = json.loads(opts["assign"])
            assign = {str(t): tuple(int(p) for p in ps) for t, ps in parsed.items()}
        except (ValueError, TypeError, AttributeError):
            raise OptionError('option \'assign\' must be JSON like {"topic":[0,1]}') from None
        topics = tuple(_ref(n, default_stream) for n in assign)
    else:
        try:
            pattern = re.compile(opts["subscribepattern"])
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
    return Options(
        volumes=tuple(v.strip() for v in data_dir.split(",") if v.strip()),
        default_stream=default_stream,
        topics=topics,
        pattern=pattern,
        pattern_stream=stream if pattern is not None else None,
        assign=assign,
        starting=_offsets(opts.get("startingoffsets"), "startingOffsets", "earliest"),
        ending=_offsets(opts.get("endingoffsets"), "endingOffsets", "latest"),
        starting_timestamp=_int(opts.get("startingtimestamp"), "startingTimestamp"),
        include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        max_offsets_per_trigger=_int(opts.get("maxoffsetspertrigger"), "maxOffsetsPerTrigger"),
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        read_committed=_isolation(opts.get("kafka.isolation.level", "read_uncommitted")),
        decode=_decode(opts.get("decode", "")),
        subjects={c: opts[f"{c}.subject"] for c in ("key", "value") if f"{c}.subject" in opts},
        schema_versions={c: _int(opts[f"{c}.schemaversion"], f"{c}.schemaVersion")  # type: ignore[misc]
                         for c in ("key", "value") if f"{c}.schemaversion" in opts},
        permissive=_mode(opts.get("mode", "FAILFAST")),
    )


def _decode(value: str) -> tuple[str, ...]:
    columns = tuple(c.strip().lower() for c in value.split(",") if c.strip())
    if not set(columns) <= {"key", "value"}:
        raise OptionError(f"option 'decode' names columns to decode through the registry: key, value or "
                          f"key,value, not {value!r}")
    return tuple(c for c in ("key", "value") if c in columns)


def _mode(value: str) -> bool:
    if value.upper() not in ("FAILFAST", "PERMISSIVE"):
        raise OptionError(f"option 'mode' must be FAILFAST or PERMISSIVE, not {value!r}")
    return value.upper() == "PERMISSIVE"


def _isolation(value: str) -> bool:
    """Spark passes kafka.* options to its consumer; this one the source honours itself."""
    if value not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, not {value!r}")
    return value == "read_committed"


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise OptionError("no topic given")
    return names


def _ref(name: str, default_stream: str) -> TopicRef:
    try:
        stream, topic = split_name(name, default_stream)
    except TopicNameError as exc:
        raise OptionError(str(exc)) from None
    return TopicRef(stream, topic, name)


def _offsets(value: str | None, option: str, default: str) -> object:
    if value is None:
        return default
    if value in ("earliest", "latest"):
        return value
    try:
        parsed = json.loads(value)
        return {str(t): {int(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'option {option!r} must be earliest, latest or JSON like {{"topic":{{"0":23}}}}') from None


def _int(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise OptionError(f"option {option!r} must be a whole number, not {value!r}") from None


def _bool(value: str, option: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise OptionError(f"option {option!r} must be true or false, not {value!r}")
    return value.lower() == "true"
