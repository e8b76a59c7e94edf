"""The `swerl` command line: one entry point, a module per command group."""
