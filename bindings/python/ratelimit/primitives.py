"""The semaphore, lock and delay queue (blocking); their asyncio
counterparts wrap these."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ._ratelimit import AcquireTimeout
from ._types import Seconds, Text

if TYPE_CHECKING:
    from .client import Client

# A wait with no timeout runs as successive waits of this length: the core
# takes a finite timeout, and a day is far beyond any useful single wait.
_FOREVER_SLICE = 86400.0


class _Held:
    """What a permit and a held lock share: a lease that can be renewed, a
    release that happens once, and a with block that releases on exit."""

    __slots__ = ("_owner", "id", "fencing_token", "lease", "released")

    def __init__(self, owner: Any, id: str, fencing_token: int, lease: float) -> None:
        self._owner = owner
        self.id = id
        self.fencing_token = fencing_token
        self.lease = lease
        self.released = False

    def _renew(self, lease: Optional[Seconds], call: Callable[[str, str, Seconds], bool]) -> bool:
        if lease is None:
            lease = self._owner.lease
        ok = call(self._owner.name, self.id, lease)
        if ok:
            self.lease = float(lease)
        return ok

    def _release(self, call: Callable[[str, str], bool]) -> bool:
        if self.released:
            return False
        self.released = True
        return call(self._owner.name, self.id)

    def release(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Permit(_Held):
    """A semaphore permit; a context manager that releases it on exit.

    id: the permit's unique id; fencing_token: strictly increasing per
    semaphore name (pass it to the resource you guard so it can refuse a
    holder whose lease already expired); lease: seconds the permit lasts
    unless refreshed.
    """

    __slots__ = ()

    def __init__(self, semaphore: "Semaphore", id: str, fencing_token: int, lease: float) -> None:
        super().__init__(semaphore, id, fencing_token, lease)

    @property
    def semaphore(self) -> "Semaphore":
        """The semaphore this permit belongs to."""
        return self._owner  # type: ignore[no-any-return]

    def refresh(self, lease: Optional[Seconds] = None) -> bool:
        """Extend the lease to lease seconds from now (default: the
        semaphore's lease). False if the permit had already expired."""
        return self._renew(lease, self.semaphore.client._semaphore_refresh)

    def release(self) -> bool:
        """Give the permit back. False if it had expired (or was released)."""
        return self._release(self.semaphore.client._semaphore_release)

    def __enter__(self) -> "Permit":
        return self

    def __repr__(self) -> str:
        return "<Permit %s of %r fencing_token=%d>" % (self.id, self.semaphore.name, self.fencing_token)


class Semaphore:
    """A fair (FIFO) distributed counting semaphore with expiring leases.

    Made by Client.semaphore(name, permits, lease). At most `permits`
    holders at once across all processes; a permit not released or
    refreshed within `lease` seconds expires, so a crashed holder cannot
    block the others forever.
    """

    def __init__(self, client: "Client", name: str, permits: int, lease: Seconds) -> None:
        self.client = client
        self.name = name
        self.permits = permits
        self.lease = lease

    def acquire(self, timeout: Optional[Seconds] = None, *,
                cancel: Optional[Callable[[], bool]] = None) -> Permit:
        """Wait up to timeout seconds (None: indefinitely) for a permit.

        Returns a Permit (use it in a with block to release it). Raises
        AcquireTimeout (a NotAcquired, not a RedisFailure) if none was
        granted in time. Waiters are served in arrival order; Ctrl-C or a
        true cancel() stops the wait.
        """
        while True:
            got = self.client._semaphore_acquire(self.name, self.permits, self.lease,
                                                 _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got is not None:
                return Permit(self, *got)
            if timeout is not None:
                raise self._timed_out(timeout)

    def _timed_out(self, timeout: Seconds) -> AcquireTimeout:
        # shared with ratelimit.aio
        return AcquireTimeout("semaphore %r: no permit within %s s (all %d taken)" % (self.name, timeout, self.permits))

    def try_acquire(self) -> Optional[Permit]:
        """A permit if one is free right now, else None (no waiting)."""
        got = self.client._semaphore_acquire(self.name, self.permits, self.lease, 0)
        return Permit(self, *got) if got is not None else None

    def available(self) -> int:
        """Permits free right now (permits minus live holders)."""
        return self.client._semaphore_available(self.name, self.permits)

    def holders(self) -> int:
        """Live (unexpired) holders right now."""
        return self.client._semaphore_holders(self.name)

    def __repr__(self) -> str:
        return "<Semaphore %r permits=%d lease=%s>" % (self.name, self.permits, self.lease)


class HeldLock(_Held):
    """A held lock; a context manager that releases it on exit.

    token (also id): the owner token (only its holder can release or
    extend); fencing_token: strictly increasing per lock name; lease: seconds.
    """

    __slots__ = ()

    def __init__(self, lock: "Lock", token: str, fencing_token: int, lease: float) -> None:
        super().__init__(lock, token, fencing_token, lease)

    @property
    def lock(self) -> "Lock":
        """The lock this hold belongs to."""
        return self._owner  # type: ignore[no-any-return]

    @property
    def token(self) -> str:
        """The owner token (same as id)."""
        return self.id

    def extend(self, lease: Optional[Seconds] = None) -> bool:
        """Make the lease end lease seconds from now (default: the lock's
        lease). False if the lock was lost (lease expired)."""
        return self._renew(lease, self.lock.client._lock_extend)

    def release(self) -> bool:
        """Unlock. False if the lease had already expired."""
        return self._release(self.lock.client._lock_release)

    def __enter__(self) -> "HeldLock":
        return self

    def __repr__(self) -> str:
        return "<HeldLock %r fencing_token=%d>" % (self.lock.name, self.fencing_token)


class Lock:
    """A distributed mutual-exclusion lock with owner and fencing tokens.

    Made by Client.lock(name, lease). The lease (seconds) bounds how long a
    crashed holder keeps it; extend it for long work.
    """

    def __init__(self, client: "Client", name: str, lease: Seconds) -> None:
        self.client = client
        self.name = name
        self.lease = lease

    def acquire(self, timeout: Optional[Seconds] = None, *,
                cancel: Optional[Callable[[], bool]] = None) -> HeldLock:
        """Wait up to timeout seconds (None: indefinitely) for the lock.
        Returns a HeldLock (a context manager); raises AcquireTimeout (a
        NotAcquired, not a RedisFailure) if it stayed held by another owner."""
        while True:
            got = self.client._lock_acquire(self.name, self.lease,
                                            _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got is not None:
                return HeldLock(self, *got)
            if timeout is not None:
                raise self._timed_out(timeout)

    def _timed_out(self, timeout: Seconds) -> AcquireTimeout:
        # shared with ratelimit.aio
        return AcquireTimeout("lock %r: not acquired within %s s (held by another owner)" % (self.name, timeout))

    def try_acquire(self) -> Optional[HeldLock]:
        """The lock if it is free right now, else None."""
        got = self.client._lock_acquire(self.name, self.lease, 0)
        return HeldLock(self, *got) if got is not None else None

    def __repr__(self) -> str:
        return "<Lock %r lease=%s>" % (self.name, self.lease)


class DelayQueue:
    """A queue of messages delivered after a delay, each to one consumer.

    Made by Client.delay_queue(name). A message is its own id: pushing one
    already queued changes nothing, so producers may retry. Messages are
    returned as str (UTF-8; undecodable bytes survive as surrogate escapes
    and push back unchanged), or as bytes with decode=False. push() and
    remove() accept str or bytes.
    """

    def __init__(self, client: "Client", name: str, decode: bool = True) -> None:
        self.client = client
        self.name = name
        self.decode = decode

    def _out(self, items: List[bytes]) -> List[Any]:
        if not self.decode:
            return items
        return [m.decode("utf-8", "surrogateescape") for m in items]

    def push(self, message: Text, delay: Seconds = 0.0) -> bool:
        """Schedule message for delivery after delay seconds. False if it
        was already queued (then it keeps its original due time)."""
        return self.client._queue_push(self.name, message, delay)

    def pop_ready(self, max: int = 1) -> List[Any]:
        """Take up to max messages that are due now (maybe none)."""
        return self._out(self.client._queue_pop_ready(self.name, max))

    def pop(self, max: int = 1, timeout: Optional[Seconds] = None, *,
            cancel: Optional[Callable[[], bool]] = None) -> List[Any]:
        """Like pop_ready, but wait up to timeout seconds (None:
        indefinitely) for a message to become due; [] on timeout. The wait
        blocks in Redis (pub/sub), no polling."""
        while True:
            got = self.client._queue_pop_wait(self.name, max,
                                              _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got or timeout is not None:
                return self._out(got)

    def size(self) -> int:
        """Messages queued, due or not."""
        return self.client._queue_size(self.name)

    def remove(self, message: Text) -> bool:
        """Drop a queued message. False if it was not queued."""
        return self.client._queue_remove(self.name, message)

    def __repr__(self) -> str:
        return "<DelayQueue %r>" % (self.name,)
