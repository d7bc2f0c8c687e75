"""The JAX-examples runner: the synthetic ``datasets`` stand-in, the number
extraction, and (when JAX's examples are at hand) one example run under the
alias."""

from __future__ import annotations

import json
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


def test_printed_numbers_leave_out_durations_and_digits_in_names() -> None:
    text = ("Epoch 3 in 1.52 sec\nTraining set accuracy 0.8984375\n"
            "  7 -104.25 (0.412 sec)\niteration 10 loss -1.5e-3 nan\n"
            "    b:f32[100,1,20] = broadcast_in_dim[broadcast_dimensions=(0, np.int64(2))] a\n")
    numbers = run_jax_examples.printed_numbers(text)
    assert numbers[:6] == [3.0, 0.8984375, 7.0, -104.25, 10.0, -1.5e-3]
    assert np.isnan(numbers[6])
    assert numbers[7:] == [100.0, 1.0, 20.0, 0.0, 2.0]


def test_compare_reports_equal_and_different_runs(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def write(name: str, runs: dict[str, object]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(runs))
        return path

    jax = write("jax.json", {"a.py": {"rc": 0, "numbers": [1.0, 0.5]},
                             "b.py": {"rc": 0, "numbers": [2.0]}})
    same = write("same.json", {"a.py": {"rc": 0, "numbers": [1.0, 0.5 + 1e-9]},
                               "b.py": {"rc": 0, "numbers": [2.0]}})
    assert run_jax_examples.compare(same, jax, rtol=1e-6) == 0
    other = write("other.json", {"a.py": {"rc": 0, "numbers": [1.0, 0.6]},
                                 "b.py": {"rc": 1, "numbers": []}})
    assert run_jax_examples.compare(other, jax, rtol=1e-6) == 1
    out = capsys.readouterr().out
    assert "a.py: 2 numbers (JAX 2), largest relative difference 0.2 -> DIFFERENT" in out
    assert "b.py: exit status lamina 1, JAX 0" in out


@pytest.mark.parametrize("ours, theirs", [
    ([1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]),
    ([2.0, 3.0], [float("nan"), 3.0]),
    ([float("inf")], [float("-inf")]),
    ([float("inf")], [1e300]),
])
def test_compare_catches_nan_and_infinity_on_one_side(tmp_path: Path, ours: list[float],
                                                      theirs: list[float]) -> None:
    lam, jax = tmp_path / "lam.json", tmp_path / "jax.json"
    lam.write_text(json.dumps({"a.py": {"rc": 0, "numbers": ours}}))
    jax.write_text(json.dumps({"a.py": {"rc": 0, "numbers": theirs}}))
    assert run_jax_examples.compare(lam, jax, rtol=0.0) == 1
    lam.write_text(json.dumps({"a.py": {"rc": 0, "numbers": theirs}}))
    assert run_jax_examples.compare(lam, jax, rtol=0.0) == 0  # NaN beside NaN is equal


# Our own stand-in for an example: it imports the data set both ways JAX's
# examples do, plots through matplotlib, and prints what the layout gives.
LAYOUT_PROBE = """
import sys

import numpy as np
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import datasets
from examples import datasets as package_datasets

train_images, train_labels, _, _ = package_datasets.mnist()
plt.figure().add_subplot(111).plot(jnp.arange(3.0), cmap=plt.cm.gray)
seeded = np.random.rand() == np.random.RandomState(0).rand()
same = np.array_equal(datasets.mnist()[0], train_images)
print(same, train_images.shape, train_labels.shape, jnp.__name__,
      seeded, sys.argv[1:])
"""


def test_scratch_layout_runs_a_script_under_the_alias(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMINA_EXAMPLE_TRAIN_SIZE", "32")
    monkeypatch.setenv("LAMINA_EXAMPLE_TEST_SIZE", "8")
    script = tmp_path / "probe.py"
    script.write_text(LAYOUT_PROBE)
    root = tmp_path / "scratch"
    copy = run_jax_examples.scratch_folder(root, script)
    assert copy == root / "examples" / "probe.py"
    assert sorted(p.name for p in (root / "examples").iterdir()) == [
        "__init__.py", "datasets.py", "probe.py"]
    assert (root / "sitecustomize.py").is_file()
    # JAX's import draws from NumPy's global random state: the run on JAX
    # imports it before the seed, so both runs draw the same data
    assert run_jax_examples.example_environment(root, "jax")["LAMINA_EXAMPLE_PRELOAD"] == "jax"
    assert run_jax_examples.example_environment(root, "lamina")["LAMINA_EXAMPLE_PRELOAD"] == ""
    result = run_jax_examples.run_example(script, "lamina", ["--flag"], 300)
    assert result["rc"] == 0, result["tail"]
    # the stand-in both ways, its layout, lamina behind `jax`, the
    # global NumPy random state seeded with 0, the arguments passed on
    assert str(result["tail"]).strip().splitlines()[-1] == (
        "True (32, 784) (32, 10) lamina.numpy True ['--flag']")


EXAMPLES = os.environ.get("LAMINA_JAX_EXAMPLES")


@pytest.mark.skipif(not EXAMPLES or not Path(EXAMPLES, "kernel_lsq.py").is_file(),
                    reason="JAX's examples are not shipped on PyPI: set LAMINA_JAX_EXAMPLES to "
                           "the examples/ folder of a JAX 0.10.2 source checkout to run them")
def test_kernel_lsq_runs_under_the_alias() -> None:
    assert EXAMPLES is not None
    result = run_jax_examples.run_example(Path(EXAMPLES, "kernel_lsq.py"), "lamina", [], 600)
    assert result["rc"] == 0, result["tail"]
    assert result["numbers"]
