"""The four-parameter logistic fit behind PLCC and RMSE finds the best curve also where it is nearly a
step (people's ratings that jump between two predictions). Each fit is held against an exhaustive grid
computed here, independently of the code: every midpoint on a fine even grid, every slope scale from a
hundred-thousandth to ten times the predictions' range, and for each pair the asymptotes by ordinary
least squares (numpy's batched solve of the normal equations)."""

import numpy as np
import pytest

from argus_dagster.protocols.alignment import metrics as al


def _grid_sse(x: np.ndarray, y: np.ndarray) -> float:
    best = float(((y - y.mean()) ** 2).sum())  # a flat curve at the mean is a logistic too
    mids = np.linspace(x.min(), x.max(), 1201)
    for scale in np.geomspace(1e-5 * np.ptp(x), 10 * np.ptp(x), 80):
        sig = 1.0 / (1.0 + np.exp(np.clip(-(x[None, :] - mids[:, None]) / scale, -500, 500)))
        ones = np.ones_like(sig)
        a = np.stack([np.stack([(ones * ones).sum(1), (ones * sig).sum(1)], -1),
                      np.stack([(sig * ones).sum(1), (sig * sig).sum(1)], -1)], -2)  # (mids, 2, 2)
        rhs = np.stack([ones @ y, sig @ y], -1)
        good = np.abs(np.linalg.det(a)) > 1e-9
        coef = np.linalg.solve(a[good], rhs[good][..., None])[..., 0]
        resid = coef[:, :1] + coef[:, 1:] * sig[good] - y[None, :]
        best = min(best, float((resid * resid).sum(1).min()))
    return best


def _ratings(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(20, 60))
    x = np.round(rng.uniform(0, 10, n), 2)
    if kind == "step":  # 1-5 ratings that jump at one prediction, a few off by one
        at = rng.uniform(2, 8)
        y = np.where(x > at, 4.0, 2.0) + rng.integers(-1, 2, n) * (rng.random(n) < 0.3)
    elif kind == "steep":  # a steep logistic, rounded to the rating scale
        y = np.round(al.logistic4(x, 5, 1, rng.uniform(3, 7), rng.uniform(0.02, 0.2)) + rng.normal(0, 0.4, n))
    else:  # a broad trend with noise
        y = np.round(1 + 0.4 * x + rng.normal(0, 0.8, n))
    return x, np.clip(y + rng.normal(0, 0.05, n), 1, 5)


@pytest.mark.parametrize("kind", ["step", "steep", "broad"])
def test_the_fit_is_at_least_as_good_as_an_exhaustive_grid(kind):
    rng = np.random.default_rng({"step": 1, "steep": 2, "broad": 3}[kind])
    for _ in range(8):
        x, y = _ratings(kind, rng)
        cal = al.fit_logistic4(x, y)
        sse = float(((cal.fitted - y) ** 2).sum())
        assert sse <= _grid_sse(x, y) * (1 + 1e-6) + 1e-9, (kind, x.tolist(), y.tolist())


def test_a_near_step_found_where_the_usual_starts_stop_short():
    # 35 ratings (seed 1, the sixth step set above): from the usual starts alone the fit stops on a
    # broader curve at PLCC 0.83; the best curve is a step (slope scale a millionth of the range), 0.86
    rng = np.random.default_rng(1)
    for _ in range(6):
        x, y = _ratings("step", rng)
    usual = al.fit_logistic4(x, y, starts=al.logistic_starts(x, y))
    best = al.fit_logistic4(x, y)
    grid = _grid_sse(x, y)
    assert float(((usual.fitted - y) ** 2).sum()) > grid + 1.0  # the usual starts miss it
    assert float(((best.fitted - y) ** 2).sum()) <= grid * (1 + 1e-6)
    assert al.pearson(best.fitted, y) > al.pearson(usual.fitted, y) + 0.02
    assert abs(best.params[3]) < 1e-3 * np.ptp(x)  # nearly a step
    # and through align(), the PLCC of the table
    assert al.align(x, y, [f"i{k // 4}" for k in range(len(x))], n_boot=0).plcc == pytest.approx(al.pearson(best.fitted, y))
