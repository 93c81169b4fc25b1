"""Built-in filters: they mark records to set aside, never drop them."""
