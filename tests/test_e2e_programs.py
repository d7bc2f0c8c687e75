"""Whole programs: a JAX-style training loop runs on lamina unchanged, and
the bundled demo trains to a useful accuracy with names in its lowering."""

from __future__ import annotations

import re

import numpy as np

from e2e_helpers import lamina_mlp_losses


def test_jax_style_mlp_training_loss_decreases():
    losses = lamina_mlp_losses(25)
    assert len(losses) == 25
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0]
    # mostly monotone: plain gradient descent with a small step
    assert sum(b > a for a, b in zip(losses, losses[1:])) <= 3


def test_demo_quick_run_reaches_accuracy(devices8, capsys):
    from lamina import demo
    accuracy = demo.main(["--quick"])
    out = capsys.readouterr().out
    assert accuracy >= 0.6, out[-3000:]
    # the demo prints the lowered train step's argument names (names everywhere)
    assert "params['dense1']['w']" in out
    assert re.search(r"final accuracy \d+\.\d%", out)
    # the shard_map run: the same model split over ('data', 'model'), same losses
    assert "#sdy.sharding<@mesh, [{}, {\"model\"}]>" in out
    assert "jit(tp_train_step)/jvp(tp_loss)/shard_map(tp_loss)/psum_invariant" in out
    losses = re.search(r"pmap loss (\S+), jit loss (\S+), shard_map loss (\S+)\)", out)
    assert losses and len({float(v) for v in losses.groups()}) == 1, out[-500:]
