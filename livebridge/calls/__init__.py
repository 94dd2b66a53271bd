"""Internal: the tool core, free of vendors and sockets: what a call is, which tool answers it,
under what policy, how it runs, and the ledger that answers each one exactly once in its vendor's
grouping.

Also the whole engine of the non-streaming adapters (``livebridge.adapters``).
"""
