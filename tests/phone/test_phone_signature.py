"""Twilio's request signature and the call cap, without I/O."""

from __future__ import annotations

from livebridge.phone.gate import CallSlots
from livebridge.phone.signature import is_signed, signature


def test_the_documented_example_signs_as_twilio_does() -> None:
    """twilio.com/docs/usage/security: the example POST and its signature."""
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+14158675309",
        "Digits": "1234",
        "From": "+14158675309",
        "To": "+18005551212",
    }
    assert signature("12345", url, params.items()) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    assert is_signed("12345", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", url, reversed(params.items()))
    with_port = "https://mycompany.com:443/myapp.php?foo=1&bar=2"
    assert is_signed("12345", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", with_port, params.items())
    assert not is_signed("12345", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", url, [])
    assert not is_signed("12346", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", url, params.items())
    assert not is_signed("12345", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", url.replace("https", "http"))
    assert not is_signed("12345", None, url)
    assert not is_signed("12345", "ü", "https://x:99999/")


def test_call_slots_hold_a_slot_for_a_stream_that_was_told_to_come() -> None:
    now = [0.0]
    slots = CallSlots(2, hold=15.0, clock=lambda: now[0])
    assert slots.offer() and slots.offer()
    assert not slots.offer()  # two calls are on their way
    assert slots.take()  # one arrives
    assert not slots.offer()
    now[0] = 15.0  # the other never came
    assert slots.offer()
    assert slots.take()
    assert not slots.take() and not slots.offer()  # two streaming
    slots.release()
    assert slots.offer()
    unlimited = CallSlots(None)
    assert all(unlimited.offer() and unlimited.take() for _ in range(100))
