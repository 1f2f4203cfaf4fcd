"""Small user policies the tests share (a user's class: never trusted, played through the public `step`)."""
from __future__ import annotations


class Closer:
    """Closes the case at once; declares a `cache_id`, so its rows are cached."""

    name = "closer"
    cache_id = "v1"

    def begin(self, brief):
        self.o = brief["order_id"]

    def act(self, obs):
        return "close", {"order_id": self.o}
