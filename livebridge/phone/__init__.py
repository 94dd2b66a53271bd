"""Phone calls: a Twilio Media Streams bridge to a ``LiveSession``, offline-testable end to end.

``twilio`` is the Media Streams message codec, ``audio`` the G.711 and resampling, ``playout``
what the caller has heard, ``bridge`` one stream ↔ one session, ``caller`` a simulated Twilio
side for tests and the demo. Needs the ``phone`` extra (soxr and numpy:
``pip install './livebridge[phone]'`` from a clone).
"""

__all__: list[str] = []
