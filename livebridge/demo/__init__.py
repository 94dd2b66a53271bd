"""Internal: ``livebridge demo``, a scripted voice-agent conversation through a real
``LiveSession``.

It runs against the emulator in this process (no key, no network) and exercises the whole
contract: parallel calls with a failure and a timeout, a streamed NON_BLOCKING booking, a barge-in
that cancels a running call, and a ``goAway`` followed by resumption on a new connection.
``--vendor openai`` plays it on OpenAI Realtime with the same tools (see ``OPENAI_STEPS``).
"""

#: ``--fast`` runs the handlers' delays at this fraction of their normal length.
FAST_PACE = 0.2
