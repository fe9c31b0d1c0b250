"""One pass of a checker: its records, the plugin contract, its progress, the runner."""
