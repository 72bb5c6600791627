"""Immutable objects in an S3-compatible store, and the bounded read cache in front of it.

Objects are written once (conditional `If-None-Match: *`, so a reused key
fails instead of replacing data) and never changed; only whole objects are
deleted, once no batch refers to them. Credentials, region and endpoint come
from the usual AWS environment variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL), as every AWS tool
reads them.
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlparse

from ..errors import StorageError, StorageUnavailableError


def parse_object_store(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; ValueError names what is wrong."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"object store {url!r} must look like s3://BUCKET/PREFIX")
    return parsed.netloc, parsed.path.strip("/")


class ObjectStore:
    """One bucket and key prefix, through aiobotocore."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.bucket, self.prefix = parse_object_store(url)
        self._stack: contextlib.AsyncExitStack | None = None
        self._client = None

    async def open(self) -> None:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        self._stack = contextlib.AsyncExitStack()
        config = AioConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
                           max_pool_connections=32)
        self._client = await self._stack.enter_async_context(get_session().create_client(
            "s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
            region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            config=config,
        ))
        try:
            await self._client.head_bucket(Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001 - any failure means the same to the operator
            await self.close()
            raise StorageError(f"object store {self.url} is not reachable or the bucket is missing: {exc}") from exc

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None
            self._client = None

    def new_key(self) -> str:
        """A fresh key for a data object, sortable by time for people reading the bucket."""
        name = f"{time.time_ns() // 1000:014x}-{uuid.uuid4().hex}.kcb"
        return f"{self.prefix}/data/{name}" if self.prefix else f"data/{name}"

    async def put(self, key: str, body: bytes) -> None:
        try:
            await self._client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
        except Exception as exc:  # noqa: BLE001
            raise StorageUnavailableError(f"writing {key} to {self.url} failed: {exc}") from exc

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object."""
        try:
            answer = await self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")
            async with answer["Body"] as body:
                data = await body.read()
        except Exception as exc:  # noqa: BLE001
            raise StorageUnavailableError(f"reading {key} from {self.url} failed: {exc}") from exc
        if len(data) != end - start:
            raise StorageUnavailableError(f"{key} in {self.url} is shorter than the index says")
        return data

    async def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            chunk = keys[i:i + 1000]
            try:
                await self._client.delete_objects(Bucket=self.bucket,
                                                  Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
            except Exception as exc:  # noqa: BLE001
                raise StorageUnavailableError(f"deleting {len(chunk)} object(s) from {self.url} failed: {exc}") from exc

    async def list_data(self) -> AsyncIterator[tuple[str, float]]:
        """(key, last modified as epoch seconds) of every data object."""
        prefix = f"{self.prefix}/data/" if self.prefix else "data/"
        paginator = self._client.get_paginator("list_objects_v2")
        pages = aiter(paginator.paginate(Bucket=self.bucket, Prefix=prefix))
        while True:
            try:
                page = await anext(pages)
            except StopAsyncIteration:
                return
            except Exception as exc:  # noqa: BLE001
                raise StorageUnavailableError(f"listing {prefix} in {self.url} failed: {exc}") from exc
            for item in page.get("Contents", ()):
                yield item["Key"], item["LastModified"].timestamp()


class BatchCache:
    """Stored batches by (object id, position), least recently used dropped past `capacity` bytes.

    Entries are memoryviews into the buffers they were fetched or uploaded
    in, so one ranged GET serving many batches is held once.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self.hits = 0
        self.misses = 0
        self._entries: collections.OrderedDict[tuple[int, int], memoryview] = collections.OrderedDict()

    def get(self, object_id: int, position: int) -> memoryview | None:
        entry = self._entries.get((object_id, position))
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end((object_id, position))
        self.hits += 1
        return entry

    def holds(self, object_id: int, position: int) -> bool:
        """Whether the batch at `position` of the object is cached (not counted as a hit or a miss)."""
        return (object_id, position) in self._entries

    def put(self, object_id: int, position: int, data: memoryview) -> None:
        if self.capacity <= 0 or len(data) > self.capacity:
            return
        key = (object_id, position)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= len(old)
        self._entries[key] = data
        self.size += len(data)
        while self.size > self.capacity:
            _, dropped = self._entries.popitem(last=False)
            self.size -= len(dropped)
