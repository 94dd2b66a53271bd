"""Vendor encoders: model-issued calls in, one answer per call out, in each vendor's grouping.

No vendor SDK is imported until an encoder needs it, and every encoder accepts the SDK's
objects as well as plain dicts of the same shape.
"""

from livebridge.adapters import anthropic, gemini, openai

__all__ = ["anthropic", "gemini", "openai"]
