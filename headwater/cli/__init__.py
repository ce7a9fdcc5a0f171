"""The `headwater` command line."""
