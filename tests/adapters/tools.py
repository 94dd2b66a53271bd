"""A small registry shared by the encoder tests."""

from __future__ import annotations

from livebridge import ToolError, ToolRegistry


def weather_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(idempotent=True)
    async def get_weather(city: str, days: int = 1) -> dict[str, object]:
        """Forecast for a city."""
        return {"city": city, "days": days, "temp_c": 21}

    @tools.tool
    async def book_table(restaurant: str, people: int) -> str:
        if people > 10:
            raise ToolError("parties above 10 must call the restaurant")
        return f"booked {restaurant} for {people}"

    return tools
