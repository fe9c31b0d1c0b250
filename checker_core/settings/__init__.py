"""The configuration: every key declared once (schema), loaded and validated (config)."""
