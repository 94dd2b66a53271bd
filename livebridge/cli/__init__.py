"""Internal: the ``livebridge`` command (``main``) and one module per subcommand: the top floor,
imported by nothing in the library."""
