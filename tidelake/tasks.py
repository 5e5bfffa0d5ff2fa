"""asyncio task housekeeping shared by the broker and the cluster member."""
from __future__ import annotations

import asyncio
from typing import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task]) -> None:
    """Cancel every task, then wait for each to finish; their errors are not the caller's (they are stopping)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
