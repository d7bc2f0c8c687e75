"""A synthetic stand-in for the ``datasets`` module of JAX's ``examples/``.

JAX's examples call ``datasets.mnist()`` (or ``mnist_raw()``), which downloads
MNIST. This module has the same two functions and return conventions but makes
a small, deterministic, learnable data set instead, so the examples run
offline and quickly, and the same data reach lamina and JAX:

- ``mnist_raw()``: ``uint8`` images of shape ``(n, 28, 28)`` and ``uint8``
  labels 0-9, for a training and a test split;
- ``mnist(permute_train=False)``: the images flattened to 784 values in
  [0, 1] (``float32``) and the labels one-hot (``float32``, 10 classes), the
  training split optionally permuted with ``RandomState(0)``.

Each class is a fixed random 28x28 template; an image is its class's
template plus noise, clipped to bytes. The sizes come from the environment
(``LAMINA_EXAMPLE_TRAIN_SIZE``, default 512; ``LAMINA_EXAMPLE_TEST_SIZE``,
default 128), so a run can be made shorter or longer without editing an
example.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["mnist", "mnist_raw"]

NUM_CLASSES = 10
IMAGE_SIDE = 28

Arrays = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any],
               np.ndarray[Any, Any]]


def _size(variable: str, default: int) -> int:
    value = int(os.environ.get(variable, default))
    if value < 1:
        raise ValueError(f"datasets: {variable} must be a positive number of images, got {value}")
    return value


def _split(templates: np.ndarray[Any, Any], n: int,
           rng: np.random.RandomState) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    labels = rng.randint(0, NUM_CLASSES, size=n).astype(np.uint8)
    noise = rng.normal(0.0, 40.0, size=(n, IMAGE_SIDE, IMAGE_SIDE))
    images = np.clip(templates[labels] + noise, 0, 255).astype(np.uint8)
    return images, labels


def mnist_raw() -> Arrays:
    """Synthetic ``(train_images, train_labels, test_images, test_labels)`` in
    MNIST's raw layout: ``uint8`` images ``(n, 28, 28)``, ``uint8`` labels."""
    rng = np.random.RandomState(20)
    templates = rng.uniform(0, 255, size=(NUM_CLASSES, IMAGE_SIDE, IMAGE_SIDE))
    train_images, train_labels = _split(templates, _size("LAMINA_EXAMPLE_TRAIN_SIZE", 512), rng)
    test_images, test_labels = _split(templates, _size("LAMINA_EXAMPLE_TEST_SIZE", 128), rng)
    return train_images, train_labels, test_images, test_labels


def _one_hot(labels: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(labels[:, None] == np.arange(NUM_CLASSES), np.float32)


def mnist(permute_train: bool = False) -> Arrays:
    """The synthetic images as ``float32`` rows of 784 values in [0, 1] and the
    labels one-hot; ``permute_train`` shuffles the training split with
    ``RandomState(0)``."""
    train_images, train_labels, test_images, test_labels = mnist_raw()
    train_x = train_images.reshape(len(train_images), -1) / np.float32(255.0)
    test_x = test_images.reshape(len(test_images), -1) / np.float32(255.0)
    train_y, test_y = _one_hot(train_labels), _one_hot(test_labels)
    if permute_train:
        order = np.random.RandomState(0).permutation(len(train_x))
        train_x, train_y = train_x[order], train_y[order]
    return train_x, train_y, test_x, test_y
