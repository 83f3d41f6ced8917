"""An example bench plugin (see docs/plugins.md)."""
