"""Micro-batching of concurrent async requests into batched calls of a synchronous engine.

:class:`MicroBatcher` gathers concurrent coroutines' items for up to ``window_s`` or
``max_batch`` items and runs one batch at a time in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


class _LoopQueue:
    """Per-event-loop state: waiting items, the flush timer, whether a batch runs."""

    __slots__ = ("pending", "timer", "running", "tasks")

    def __init__(self) -> None:
        self.pending: list[tuple[object, asyncio.Future]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.running = False
        self.tasks: set[asyncio.Task] = set()


class MicroBatcher(Generic[ItemT, ResultT]):
    """Collects concurrent :meth:`submit` calls into calls of ``run_batch``.

    Args:
        run_batch: ``run_batch(items) -> results``, synchronous, one result per item in
            order; run in a worker thread. If it raises, every caller of that batch gets
            the exception. Calls never overlap within one event loop.
        max_batch: most items per call (>= 1).
        window_s: how long the first waiting item waits for company (>= 0 seconds).

    Attributes:
        n_batches: calls of ``run_batch`` so far (for tests and logs).

    Raises:
        ValueError: ``max_batch`` < 1 or ``window_s`` < 0.
    """

    def __init__(self, run_batch: Callable[[list[ItemT]], Sequence[ResultT]], *,
                 max_batch: int = 256, window_s: float = 0.005) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {window_s}")
        self._run_batch = run_batch
        self.max_batch = int(max_batch)
        self.window_s = float(window_s)
        self.n_batches = 0
        self._lock = threading.Lock()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = (
            weakref.WeakKeyDictionary())

    async def submit(self, item: ItemT) -> ResultT:
        """Queue ``item`` and wait for its result (or the batch's exception)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            queue = self._queues.get(loop)
            if queue is None:
                queue = self._queues[loop] = _LoopQueue()
        future = loop.create_future()
        queue.pending.append((item, future))
        if not queue.running:
            if len(queue.pending) >= self.max_batch:
                self._flush(loop, queue)
            elif queue.timer is None:
                queue.timer = loop.call_later(self.window_s, self._flush, loop, queue)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop, queue: _LoopQueue) -> None:
        if queue.timer is not None:
            queue.timer.cancel()
            queue.timer = None
        if queue.running or not queue.pending:
            return
        batch = queue.pending[:self.max_batch]
        del queue.pending[:self.max_batch]
        queue.running = True
        task = loop.create_task(self._run(loop, queue, batch))
        queue.tasks.add(task)
        task.add_done_callback(queue.tasks.discard)

    async def _run(self, loop: asyncio.AbstractEventLoop, queue: _LoopQueue,
                   batch: list[tuple[object, asyncio.Future]]) -> None:
        try:
            self.n_batches += 1
            results = await asyncio.to_thread(self._run_batch, [item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"run_batch returned {len(results)} results for "
                                   f"{len(batch)} items")
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - every caller of the batch gets it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():  # the caller may have been cancelled
                    future.set_result(result)
        finally:
            queue.running = False
            if queue.pending:
                self._flush(loop, queue)
