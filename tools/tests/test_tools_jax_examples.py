"""The JAX-examples runner: the synthetic ``datasets`` stand-in, the number
extraction, and (when JAX's examples are at hand) one example run under the
alias."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tools.ecosystem import run_jax_examples
from tools.ecosystem.jax_examples import datasets


def test_stand_in_has_mnist_layout_and_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMINA_EXAMPLE_TRAIN_SIZE", "64")
    monkeypatch.setenv("LAMINA_EXAMPLE_TEST_SIZE", "16")
    train_images, train_labels, test_images, test_labels = datasets.mnist_raw()
    assert train_images.shape == (64, 28, 28) and train_images.dtype == np.uint8
    assert train_labels.shape == (64,) and train_labels.max() <= 9
    assert test_images.shape == (16, 28, 28) and test_labels.shape == (16,)
    x, y, tx, ty = datasets.mnist()
    assert x.shape == (64, 784) and x.dtype == np.float32 and 0 <= x.min() <= x.max() <= 1
    assert y.shape == (64, 10) and np.all(y.sum(1) == 1) and ty.shape == (16, 10)
    np.testing.assert_array_equal(datasets.mnist()[0], x)
    shuffled = datasets.mnist(permute_train=True)
    assert not np.array_equal(shuffled[0], x)
    np.testing.assert_array_equal(np.sort(shuffled[1].argmax(1)), np.sort(y.argmax(1)))
    # learnable: the nearest class template (class means of the training
    # split) labels most test images right
    means = np.stack([x[y.argmax(1) == c].mean(0) for c in range(10)])
    nearest = ((tx[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (nearest == ty.argmax(1)).mean() > 0.9


def test_stand_in_rejects_bad_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMINA_EXAMPLE_TRAIN_SIZE", "0")
    with pytest.raises(ValueError, match="LAMINA_EXAMPLE_TRAIN_SIZE"):
        datasets.mnist()


def test_printed_numbers_leave_out_timings() -> None:
    text = ("Epoch 0 in 1.52 sec\nTraining set accuracy 0.8984375\n"
            "Test set accuracy 0.875\niteration 10 loss -1.5e-3 nan\n")
    numbers = run_jax_examples.printed_numbers(text)
    assert numbers[:4] == [0.8984375, 0.875, 10.0, -1.5e-3] and len(numbers) == 5
    assert np.isnan(numbers[4])


EXAMPLES = os.environ.get("LAMINA_JAX_EXAMPLES")


@pytest.mark.skipif(not EXAMPLES or not Path(EXAMPLES, "kernel_lsq.py").is_file(),
                    reason="JAX's examples are not shipped on PyPI: set LAMINA_JAX_EXAMPLES to "
                           "the examples/ folder of a JAX 0.10.2 source checkout to run them")
def test_kernel_lsq_runs_under_the_alias() -> None:
    assert EXAMPLES is not None
    result = run_jax_examples.run_example(Path(EXAMPLES, "kernel_lsq.py"), "lamina", [], 600)
    assert result["rc"] == 0, result["tail"]
    assert result["numbers"]
