"""The tool examples on docs/configuration.md, run as written in real sessions on both vendors:
the supervisor's approval refuses a large refund and allows a small one; ``end_call`` hangs up
once its turn stands."""

from __future__ import annotations

from typing import Any

import pytest

import livebridge
from livebridge.emulator import Conversation, Emulator
from tests.support.vendor_sessions import VENDORS, Vendor, open_vendor_session, settled_turn
from tests.test_readme import blocks

pytestmark = pytest.mark.parametrize("vendor", VENDORS)

SECTION = ("docs/configuration.md", "Configuration and events")


def registry(word: str) -> livebridge.ToolRegistry:
    """The ``tools`` of the page's block that mentions ``word``, run as written."""
    (code,) = [b for b in blocks(*SECTION) if word in b]
    namespace: dict[str, Any] = {"__name__": "configuration_example"}
    exec(compile(code, SECTION[0], "exec"), namespace)  # the page's own code
    tools: livebridge.ToolRegistry = namespace["tools"]
    return tools


async def answers(
    vendor: Vendor, tools: livebridge.ToolRegistry, calls: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any] | None]:
    """The model asks for ``calls`` in one turn; what the app answered each."""
    found: list[dict[str, Any] | None] = []

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call(calls)
        if vendor == "gemini":  # the generation is over: an irreversible call's turn stands
            await conv.send({"serverContent": {"generationComplete": True}})
        answered = await conv.wait_answers(ids, timeout=30)
        found.extend(answered[i].response if i in answered else None for i in ids)
        await conv.say("done")
        await conv.turn_complete()

    async with (
        Emulator(scenario, protocol=vendor) as emu,
        open_vendor_session(vendor, emu, tools) as session,
    ):
        await session.send_text("go")
        await settled_turn(session)
        assert emu.violations == []
    return found


async def test_the_approval_example(vendor: Vendor) -> None:
    tools = registry("approve=")
    large, small = await answers(
        vendor,
        tools,
        [
            ("refund", {"order_id": "o-1", "amount": 500}),
            ("refund", {"order_id": "o-2", "amount": 20}),
        ],
    )
    assert large == {
        "error": {
            "type": "denied",
            "message": "Payments over 100 need a supervisor; offer to transfer the caller.",
            "retryable": False,
        }
    }
    assert small == {"output": {"order_id": "o-2", "refunded": "20"}}


async def test_the_irreversible_example(vendor: Vendor) -> None:
    tools = registry("irreversible=True")
    (hung_up,) = await answers(vendor, tools, [("end_call", {"reason": "done"})])
    assert hung_up == {"output": "hung up"}
