"""Our synthetic stand-ins for the data JAX's examples download."""
