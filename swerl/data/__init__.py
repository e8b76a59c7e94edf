"""Small data files that ship with swerl (samples for demos and tests)."""
