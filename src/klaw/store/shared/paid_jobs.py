"""Embedding jobs a vector put has paid, so the queue's `complete` of them needs no round trip.

A put deletes the jobs owed for the vectors it stores, in its own transaction (decision 229): a
vector stored is work no longer owed, and no crash can leave one without the other. The queue then
calls `complete` with those job ids, as it always has; the ids kept here let that call return at
once instead of deleting nothing on the database.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

_KEPT = 4096  # ids paid whose `complete` has not come yet (it follows the put at once)


class PaidJobs:
    """Job ids deleted by committed puts, until `complete` names them (a bounded set)."""

    def __init__(self) -> None:
        self._ids: OrderedDict[int, None] = OrderedDict()

    def add(self, job_ids: Iterable[int]) -> None:
        """After the put's commit: these jobs are gone."""
        for job_id in job_ids:
            self._ids[int(job_id)] = None
        while len(self._ids) > _KEPT:
            self._ids.popitem(last=False)

    def unpaid(self, job_ids: Sequence[int]) -> list[int]:
        """Of `job_ids`, those no put has paid (the ones `complete` must still delete); the paid are
        forgotten, so an id SQLite gives a later job is deleted by its own `complete`."""
        left = []
        for job_id in job_ids:
            if job_id in self._ids:
                del self._ids[job_id]
            else:
                left.append(job_id)
        return left
