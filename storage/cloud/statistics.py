"""When a process that fills a table fast asks PostgreSQL to refresh its statistics (ANALYZE).

PostgreSQL plans each statement from its tables' statistics, which autovacuum
refreshes once a tenth of a table's rows changed, at most once a minute per
database (`autovacuum_naptime`). kc_commit joins kc_partition_leaders,
kc_topics and kc_partitions to fence each append. Filled by CreateTopics
requests of a thousand topics a second, those tables outgrew their
statistics: planned as the near-empty tables they had been, each join read
them whole, and at 100,000 topics a commit took 160 ms instead of 0.5 ms,
until a minute after the last topic was made (a steady producer's p99 went
from 30 ms to 4.5 s; issue 32). So the store and the cluster layer count
the rows they add and analyze the tables themselves once those grew by a
fifth since their last look (SKIP_LOCKED: a table autovacuum or another
broker is analyzing is left to them).
"""

from __future__ import annotations

from typing import Any

GROWTH = 0.2  # of the rows at the last ANALYZE: added since, the tables are analyzed again
AT_LEAST = 1_000  # rows added before any ANALYZE: smaller tables plan well whatever their statistics


class TableStatistics:
    """Counts the rows this process added to `tables` and says when to analyze them."""

    def __init__(self, *tables: str) -> None:
        self.tables = tables
        self._basis = 0  # rows at the last ANALYZE this process asked for
        self._added = 0
        self.analyzed = 0  # ANALYZE statements sent, for tests and the bench

    def added(self, rows: int, total: int) -> bool:
        """Note `rows` added, `total` rows now; True when the tables should be analyzed (and the
        count starts again from `total`)."""
        self._added += rows
        if self._added < max(AT_LEAST, GROWTH * self._basis):
            return False
        self._basis, self._added = total, 0
        return True

    async def analyze(self, conn: Any) -> None:
        self.analyzed += 1
        await conn.execute(f"ANALYZE (SKIP_LOCKED) {', '.join(self.tables)}")
