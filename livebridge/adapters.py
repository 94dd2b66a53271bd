"""Vendor encoders: model-issued calls in, one answer per call out, in each vendor's grouping.

No vendor SDK is imported until an encoder needs it, and every encoder accepts the SDK's
objects as well as plain dicts of the same shape.
"""

from livebridge.vendors import anthropic
from livebridge.vendors.gemini import adapter as gemini
from livebridge.vendors.openai import adapter as openai

__all__ = ["anthropic", "gemini", "openai"]
