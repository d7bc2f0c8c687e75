"""``lamina.export``: serialize a jitted function and call it back (``jax.export``'s names)."""

from lamina_sharded_jit.export import Exported, deserialize, export, serialize

__all__ = ["Exported", "deserialize", "export", "serialize"]
