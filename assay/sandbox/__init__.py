"""Sandboxes: attempts in fresh Docker containers (the `container` target), and what scores them."""
