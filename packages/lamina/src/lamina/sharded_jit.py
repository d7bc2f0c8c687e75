"""``lamina.sharded_jit``: partition a function with partition counts (old ``jax.experimental.sharded_jit``)."""

from lamina_sharded_jit.sharded_jit import PartitionSpec, sharded_jit, with_sharding_constraint

__all__ = ["PartitionSpec", "sharded_jit", "with_sharding_constraint"]
