"""Package evaluation (``forge eval``): models or built-in solvers answer a released package's
items, the package's own scorer scores every reply, the rows go to a store, and a report gives
accuracy overall, per capability and per question type.

    package   EvalPackage, load_package: manifest, items, answer key, media, the package's scorer
    prompt    the solver-agnostic prompt, and which reading of a reply goes to the scorer
    solvers   built-in solvers (random, prior, text, oracle-noisy), all simulated; a registry
    spec      ModelSpec, parse_spec: builtin:NAME, BASE_URL@MODEL or @FILE.yaml
    records   the eval_responses table, written in bulk
    run       evaluate, summarize, render: the run, resumable, and its report
"""

from forge.evaluation.package import EvalPackage, load_package
from forge.evaluation.run import EvalOptions, evaluate, render, summarize
from forge.evaluation.solvers import SOLVERS, Solver, SolverContext, register, solver
from forge.evaluation.spec import ModelSpec, parse_spec

__all__ = ["EvalOptions", "EvalPackage", "ModelSpec", "SOLVERS", "Solver", "SolverContext", "evaluate",
           "load_package", "parse_spec", "register", "render", "solver", "summarize"]
