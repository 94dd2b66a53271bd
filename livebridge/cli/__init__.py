"""The ``livebridge`` command (``main``) and one module per subcommand: the top floor, imported by
nothing in the library."""

__all__: list[str] = []
