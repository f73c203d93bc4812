"""Vectorized numerical kernels for the 2PL fit: a stable softplus, a lane-wise port of the
bounded Brent minimizer behind ``scipy.optimize.minimize_scalar(method="bounded")``, and a
damped Newton solver for many independent two-parameter problems at once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_SQRT_EPS = np.sqrt(2.2e-16)
_GOLDEN = 0.5 * (3.0 - np.sqrt(5.0))


def softplus(z: np.ndarray) -> np.ndarray:
    """log(1 + exp(z)) without overflow."""
    out = np.exp(-np.abs(z))
    np.log1p(out, out=out)
    out += np.maximum(z, 0.0)
    return out


def sigmoid(z: np.ndarray) -> np.ndarray:
    out = np.negative(z)
    np.exp(out, out=out)
    out += 1.0
    np.reciprocal(out, out=out)
    return out


def bounded_brent(func: Callable[[np.ndarray, np.ndarray], np.ndarray], lanes: int, bounds: tuple[float, float],
                  xatol: float = 1e-5, maxfun: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimize ``lanes`` independent scalar functions on one interval.

    ``func(x, idx)`` returns the values of lanes ``idx`` at points ``x`` (lane idx[j] at x[j]);
    it is asked only for the lanes still running. Each lane follows scipy's bounded Brent iteration step for step, so a lane ends where
    ``minimize_scalar(f_j, bounds=bounds, method="bounded", options={"xatol": xatol})`` ends; a
    lane that has converged is frozen while the others go on. Returns (x, f(x), evaluations).
    """
    lo, hi = float(bounds[0]), float(bounds[1])
    a = np.full(lanes, lo)
    b = np.full(lanes, hi)
    fulc = a + _GOLDEN * (b - a)
    nfc = fulc.copy()
    xf = fulc.copy()
    rat = np.zeros(lanes)
    e = np.zeros(lanes)
    fx = np.asarray(func(xf, np.arange(lanes)), dtype=float).copy()
    ffulc = fx.copy()
    fnfc = fx.copy()
    nfev = np.ones(lanes, dtype=int)
    xm = 0.5 * (a + b)
    tol1 = _SQRT_EPS * np.abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    active = np.abs(xf - xm) > (tol2 - 0.5 * (b - a))
    with np.errstate(invalid="ignore", divide="ignore"):
        while active.any():
            # Parabolic step where the last-but-one step was large enough, else golden section.
            para = np.abs(e) > tol1
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            p = np.where(q > 0.0, -p, p)
            q = np.abs(q)
            e_prev = e
            e_para = np.where(para, rat, e)
            accept = (para & (np.abs(p) < np.abs(0.5 * q * e_prev))
                      & (p > q * (a - xf)) & (p < q * (b - xf)))
            rat_para = np.where(accept, p / np.where(q == 0.0, 1.0, q), 0.0)
            x_para = xf + rat_para
            near_edge = ((x_para - a) < tol2) | ((b - x_para) < tol2)
            toward_mid = np.sign(xm - xf) + ((xm - xf) == 0)
            rat_para = np.where(near_edge, tol1 * toward_mid, rat_para)
            e_gold = np.where(xf >= xm, a - xf, b - xf)
            new_e = np.where(accept, e_para, e_gold)
            new_rat = np.where(accept, rat_para, _GOLDEN * e_gold)
            step_sign = np.sign(new_rat) + (new_rat == 0)
            x = xf + step_sign * np.maximum(np.abs(new_rat), tol1)
            x = np.where(active, x, xf)
            fu = fx.copy()
            idx = np.flatnonzero(active)
            fu[idx] = func(x[idx], idx)

            better = fu <= fx
            right = x >= xf
            new_a = np.where(better, np.where(right, xf, a), np.where(~right, x, a))
            new_b = np.where(better, np.where(right, b, xf), np.where(~right, b, x))
            shift1 = ~better & ((fu <= fnfc) | (nfc == xf))
            shift2 = ~better & ~shift1 & ((fu <= ffulc) | (fulc == xf) | (fulc == nfc))
            new_fulc = np.where(better | shift1, nfc, np.where(shift2, x, fulc))
            new_ffulc = np.where(better | shift1, fnfc, np.where(shift2, fu, ffulc))
            new_nfc = np.where(better, xf, np.where(shift1, x, nfc))
            new_fnfc = np.where(better, fx, np.where(shift1, fu, fnfc))
            new_xf = np.where(better, x, xf)
            new_fx = np.where(better, fu, fx)

            for old, new in ((a, new_a), (b, new_b), (fulc, new_fulc), (ffulc, new_ffulc), (nfc, new_nfc),
                             (fnfc, new_fnfc), (xf, new_xf), (fx, new_fx), (e, new_e), (rat, new_rat)):
                np.copyto(old, new, where=active)
            nfev += active
            xm = 0.5 * (a + b)
            tol1 = _SQRT_EPS * np.abs(xf) + xatol / 3.0
            tol2 = 2.0 * tol1
            active &= (np.abs(xf - xm) > (tol2 - 0.5 * (b - a))) & (nfev < maxfun)
    return xf, fx, nfev


def newton_2d(grad_hess: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, ...]],
              objective: Callable[[np.ndarray, np.ndarray], np.ndarray],
              u: np.ndarray, v: np.ndarray, *, tol: float = 1e-10,
              maxiter: int = 100) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimize many independent strictly convex functions of two variables (u, v).

    ``grad_hess(u, v)`` returns (g_u, g_v, h_uu, h_uv, h_vv), ``objective(u, v)`` the values,
    all elementwise over the problems. Each problem takes full Newton steps, halved until its
    value does not increase (logistic likelihoods overshoot far from the optimum); a problem
    stops once its Newton decrement g'H^-1 g falls below ``tol``, after one last full step, or
    when no halving descends any more (float precision). Returns (u, v, iterations), the
    iterations reaching ``maxiter`` when some problem had not stopped.
    """
    u = u.copy()
    v = v.copy()
    f = objective(u, v)
    stuck = np.zeros(u.shape, dtype=bool)
    for it in range(1, maxiter + 1):
        gu, gv, huu, huv, hvv = grad_hess(u, v)
        det = huu * hvv - huv * huv
        with np.errstate(divide="ignore", invalid="ignore"):
            du = -(hvv * gu - huv * gv) / det
            dv = -(huu * gv - huv * gu) / det
        usable = np.isfinite(du) & np.isfinite(dv) & ~stuck
        du = np.where(usable, du, 0.0)
        dv = np.where(usable, dv, 0.0)
        todo = -(gu * du + gv * dv) > tol
        if not todo.any():
            return u + du, v + dv, it
        step = np.where(todo, 1.0, 0.0)
        for halvings in range(41):
            f_new = objective(u + step * du, v + step * dv)
            worse = todo & (f_new > f)
            if not worse.any():
                break
            if halvings == 40:
                step = np.where(worse, 0.0, step)
                f_new = np.where(worse, f, f_new)
                stuck |= worse
                break
            step = np.where(worse, step * 0.5, step)
        u += step * du
        v += step * dv
        f = np.where(step > 0, f_new, f)
    return u, v, maxiter
