"""Only a Redis that never evicts may hold conversations (and shared limits).

A Redis under ``maxmemory`` with any policy but ``noeviction`` deletes keys to make room: an
``allkeys-*`` policy may pick a live conversation's lease, epoch, handle and journal (a Redis
shared with a cache, the common setup), and a ``volatile-*`` one picks keys with a TTL, which
every livebridge key has. A lease gone means a second worker takes the conversation without
``ConversationBusyError``; a journal gone means a non-idempotent call runs again. So the
policy is read when a store or limiter first uses its Redis (``CONFIG GET``, or ``INFO memory``
where a managed Redis refuses ``CONFIG``) and any other policy, or one that cannot be read, is
refused with ``EvictionPolicyError``; ``allow_eviction=True`` makes that a loud warning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from livebridge.errors import EvictionPolicyError

if TYPE_CHECKING:
    import redis.asyncio

log = logging.getLogger("livebridge.store")

#: The one ``maxmemory-policy`` under which Redis never deletes a key it was not told to.
SAFE_POLICY = "noeviction"


async def read_policy(client: redis.asyncio.Redis) -> str | None:
    """The server's ``maxmemory-policy``, or None when neither ``CONFIG GET`` nor ``INFO``
    may be run. Errors other than a refused command (the server is down) propagate."""
    from redis.exceptions import ResponseError

    try:
        reply: dict[Any, Any] = await client.config_get("maxmemory-policy")
        for value in reply.values():
            return _text(value)
    except ResponseError:  # CONFIG renamed away or denied by an ACL: managed Redis
        pass
    try:
        info: dict[Any, Any] = await client.info("memory")
        value = info.get("maxmemory_policy")
        if value is not None:
            return _text(value)
    except ResponseError:
        pass
    return None


def judge(policy: str | None, where: str, *, allow: bool) -> None:
    """Refuse (``EvictionPolicyError``) a ``policy`` other than ``noeviction``, or warn when
    ``allow``; ``where`` names the Redis and its user in the message."""
    if policy == SAFE_POLICY:
        return
    if policy is None:
        what = (
            f"{where}: its maxmemory-policy cannot be read (CONFIG GET and INFO memory were"
            " refused), so it may evict the keys that fence conversations"
        )
    else:
        what = (
            f"{where} has maxmemory-policy {policy}: under memory pressure it may evict the"
            " keys that fence conversations (a lease, an epoch, a journal), and a second"
            " worker could then take a live conversation and run a call again"
        )
    fix = (
        "set maxmemory-policy noeviction on that Redis (or give livebridge a Redis of its own),"
        " or pass allow_eviction=True to accept the risk"
    )
    if not allow:
        raise EvictionPolicyError(f"{what}; {fix}", policy=policy)
    log.warning("%s; allow_eviction=True: going on regardless", what)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
