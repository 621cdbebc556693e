"""The `kz` command."""
