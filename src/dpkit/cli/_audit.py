"""``dpkit audit``: black-box audits of dpkit's mechanisms, LDP protocols, the known-bad corpus and
the user's own code (``dpkit audit code module:function``).

Every command draws outputs on a pair of neighbouring inputs, prints the epsilon (and mu) lower
bound with its confidence and the verdict on the mechanism's claim, and can save the trade-off
plot. The exit code is 1 when the claim is violated (proven at the stated confidence), 0 when no
violation was found, 2 for a usage error.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dpkit.audit import AuditResult, Claim, audit, audit_ldp, known_bad
from dpkit.noise import RandomSource

__all__ = ["app", "run_audit"]

app = typer.Typer(
    help="Audit a mechanism: an epsilon lower bound with its confidence, and a verdict.",
    no_args_is_help=True,
)

SAMPLES = typer.Option(1_000_000, "--samples", help="outputs drawn per input")
CONFIDENCE = typer.Option(0.95, "--confidence", help="confidence of the bound and the verdict")
SEED = typer.Option(None, "--seed", help="seed the audit (insecure: reproducible runs only)")
PLOT = typer.Option(None, "--plot", help="save the empirical vs claimed trade-off plot here")
SENSITIVITY = typer.Option(1.0, "--sensitivity", help="sensitivity of the audited query")


def _source(seed: int | None) -> RandomSource | None:
    return None if seed is None else RandomSource(seed=seed, insecure=True)


def run_audit(
    mechanism: Any,
    *,
    pair: tuple[Any, Any] | None = None,
    claim: Claim,
    samples: int,
    confidence: float,
    seed: int | None,
    plot: Path | None,
    title: str,
    ldp_protocol: bool = False,
    testers: Any = None,
    vectorized: bool = False,
    console: Console | None = None,
) -> AuditResult:
    """Run one audit with a progress bar, print the result, save the plot; return the result."""
    console = console or Console()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} outputs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(escape(f"sampling {title}"), total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if ldp_protocol:
            result = audit_ldp(
                mechanism,
                samples=samples,
                claim=claim,
                confidence=confidence,
                source=_source(seed),
                progress=progress,
                testers=testers,
            )
        else:
            result = audit(
                mechanism,
                pair,
                samples=samples,
                claim=claim,
                confidence=confidence,
                source=_source(seed),
                progress=progress,
                testers=testers,
                vectorized=vectorized,
            )
    table = Table(title=escape(f"audit of {title}"), show_header=False)
    table.add_row("claim", escape(claim.label))
    table.add_row(
        "epsilon lower bound", f"{result.epsilon_lower_bound:.4f} (delta = {result.delta:g})"
    )
    table.add_row("mu lower bound", f"{result.mu_lower_bound:.4f}")
    if result.ratio is not None:
        table.add_row("lower bound / claim", f"{result.ratio:.3f}")
    table.add_row("confidence", f"{result.confidence:g}")
    colour = "red" if result.violated else "green"
    table.add_row("verdict", f"[bold {colour}]{result.verdict}[/]")
    table.add_row("inputs", escape(f"{result.pair[0]!r} vs {result.pair[1]!r}"))
    table.add_row("test", escape(f"{result.tester}: {result.event}"))
    p = result.point
    table.add_row(
        "errors",
        f"alpha {p.alpha:.6g} (<= {p.alpha_upper:.6g}), beta {p.beta:.6g} (<= {p.beta_upper:.6g})",
    )
    table.add_row("samples", f"{result.samples:,} per input, {result.seconds:.2f} s")
    console.print(table)
    if plot is not None:
        result.plot(plot)
        console.print(escape(f"plot saved to {plot}"))
    return result


def _finish(result: AuditResult) -> None:
    if result.violated:
        raise typer.Exit(code=1)


@app.command("laplace")
def laplace(
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    sensitivity: float = SENSITIVITY,
    samples: int = SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's Laplace mechanism on the inputs 0 and sensitivity."""
    from dpkit.mechanisms import Laplace

    m = Laplace.from_epsilon(epsilon=epsilon, sensitivity=sensitivity)
    _finish(
        run_audit(
            m,
            pair=(0.0, sensitivity),
            claim=Claim.pure(epsilon=m.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"Laplace(epsilon={epsilon:g})",
        )
    )


@app.command("gaussian")
def gaussian(
    mu: float | None = typer.Option(None, "--mu", help="claimed mu (mu-GDP)"),
    epsilon: float | None = typer.Option(None, "--epsilon", help="claimed epsilon"),
    delta: float | None = typer.Option(None, "--delta", help="claimed delta (with --epsilon)"),
    sensitivity: float = SENSITIVITY,
    samples: int = SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's Gaussian mechanism, calibrated by --mu or by --epsilon and --delta."""
    from dpkit.mechanisms import Gaussian

    if (mu is None) == (epsilon is None or delta is None):
        raise typer.BadParameter("give either --mu, or --epsilon and --delta")
    if mu is not None:
        m = Gaussian.from_mu(mu=mu, sensitivity=sensitivity)
        claim = Claim.gdp(mu=m.mu)
        title = f"Gaussian(mu={mu:g})"
    else:
        assert epsilon is not None and delta is not None  # checked just above
        m = Gaussian.from_epsilon_delta(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        claim = Claim.approx(epsilon=epsilon, delta=delta)
        title = f"Gaussian(epsilon={epsilon:g}, delta={delta:g})"
    _finish(
        run_audit(
            m,
            pair=(0.0, sensitivity),
            claim=claim,
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=title,
        )
    )


@app.command("discrete-laplace")
def discrete_laplace(
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    samples: int = SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's discrete Laplace mechanism on the integers 0 and 1."""
    from dpkit.mechanisms import DiscreteLaplace

    m = DiscreteLaplace.from_epsilon(epsilon=epsilon, sensitivity=1)
    _finish(
        run_audit(
            m,
            pair=(0, 1),
            claim=Claim.pure(epsilon=m.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"DiscreteLaplace(epsilon={epsilon:g})",
        )
    )


@app.command("randomized-response")
def randomized_response(
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    samples: int = SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's randomized response on the bits 0 and 1."""
    from dpkit.mechanisms import RandomizedResponse

    m = RandomizedResponse.from_epsilon(epsilon=epsilon)
    _finish(
        run_audit(
            m,
            pair=(0, 1),
            claim=Claim.pure(epsilon=m.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"RandomizedResponse(epsilon={epsilon:g})",
        )
    )


def _selection_pair(candidates: int) -> tuple[Any, Any]:
    # every score moves by one: (0, 1, ..., 1) vs (1, 0, ..., 0), the classic worst case
    u = np.ones(candidates)
    u[0] = 0.0
    v = np.zeros(candidates)
    v[0] = 1.0
    return u, v


@app.command("exponential")
def exponential(
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    candidates: int = typer.Option(10, "--candidates", help="number of candidates"),
    samples: int = typer.Option(100_000, "--samples", help="outputs drawn per input"),
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's exponential mechanism on two score vectors differing by one everywhere."""
    from dpkit.mechanisms import ExponentialMechanism

    if candidates < 2:
        raise typer.BadParameter("--candidates must be at least 2")
    m = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0)
    _finish(
        run_audit(
            m,
            pair=_selection_pair(candidates),
            claim=Claim.pure(epsilon=m.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"ExponentialMechanism(epsilon={epsilon:g})",
        )
    )


@app.command("noisy-max")
def noisy_max(
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    noise: str = typer.Option("laplace", "--noise", help="laplace, exponential or gumbel"),
    candidates: int = typer.Option(10, "--candidates", help="number of candidates"),
    samples: int = typer.Option(100_000, "--samples", help="outputs drawn per input"),
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's report-noisy-max on two score vectors differing by one everywhere."""
    from dpkit.mechanisms import ReportNoisyMax

    if candidates < 2:
        raise typer.BadParameter("--candidates must be at least 2")
    m = ReportNoisyMax(epsilon=epsilon, sensitivity=1.0, noise=noise)
    _finish(
        run_audit(
            m,
            pair=_selection_pair(candidates),
            claim=Claim.pure(epsilon=m.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"ReportNoisyMax({noise}, epsilon={epsilon:g})",
        )
    )


@app.command("ldp")
def ldp_protocol(
    protocol: str = typer.Argument(
        ..., help="rr, grr, sue, oue, olh, blh, hr, duchi, piecewise or hybrid"
    ),
    epsilon: float = typer.Option(..., "--epsilon", help="claimed epsilon"),
    domain: int = typer.Option(4, "--domain", help="domain size (frequency protocols)"),
    samples: int = typer.Option(200_000, "--samples", help="outputs drawn per input"),
    client: bool = typer.Option(
        False,
        "--client",
        help="audit the device-side randomize() "
        "(one call per report) instead of the vectorised server path",
    ),
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """A dpkit local-DP protocol, over every pair of inputs of a small domain."""
    from dpkit.cli._ldp import make_protocol

    if protocol.lower() == "best":
        raise typer.BadParameter("name a protocol")
    proto = make_protocol(protocol, epsilon=epsilon, domain=domain)
    target: Any = proto
    if client:
        labels = getattr(proto, "labels", None)
        values = list(labels) if isinstance(labels, tuple) else [-1.0, 0.0, 1.0]
        target = _LdpClient(proto.randomize, values, proto.epsilon)
    name = type(proto).__name__ + (" client" if client else "")
    _finish(
        run_audit(
            target,
            claim=Claim.pure(epsilon=proto.epsilon),
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"{name}(epsilon={epsilon:g})",
            ldp_protocol=True,
        )
    )


class _LdpClient:
    """A device-side ``randomize`` seen as a protocol: one call per report."""

    def __init__(self, randomize: Any, labels: list[Any], epsilon: float) -> None:
        self.randomize, self.labels, self.epsilon = randomize, tuple(labels), epsilon

    def __call__(self, value: Any) -> Any:
        return self.randomize(value)


@app.command("discrete-gaussian")
def discrete_gaussian(
    sigma: float = typer.Option(..., "--sigma", help="noise parameter sigma"),
    delta: float = typer.Option(1e-3, "--delta", help="delta of the claim"),
    samples: int = SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """dpkit's discrete Gaussian on 0 and 1, against the epsilon its PLD accountant certifies."""
    from dpkit.accounting.pld import PldAccountant
    from dpkit.mechanisms import DiscreteGaussian

    m = DiscreteGaussian.from_sigma(sigma=sigma, sensitivity=1)
    eps = PldAccountant().compose(m.event).get_epsilon(delta)
    claim = Claim.approx(epsilon=eps, delta=delta)
    _finish(
        run_audit(
            m,
            pair=(0, 1),
            claim=claim,
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=f"DiscreteGaussian(sigma={sigma:g})",
        )
    )


@app.command("known-bad")
def known_bad_cmd(
    name: str = typer.Argument(..., help="entry of the known-bad corpus, or 'list'"),
    epsilon: float = typer.Option(1.0, "--epsilon", help="epsilon the broken mechanism claims"),
    samples: int | None = typer.Option(
        None, "--samples", help="outputs drawn per input (default: the entry's, at least 10^5)"
    ),
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """A mechanism of the known-bad corpus (it should be reported violated)."""
    entries = {e.name: e for e in known_bad.corpus(epsilon=epsilon)}
    if name == "list":
        for key in entries:
            typer.echo(key)
        return
    if name not in entries:
        raise typer.BadParameter(f"unknown entry {name!r}; choose one of {', '.join(entries)}")
    e = entries[name]
    _finish(
        run_audit(
            e.mechanism,
            pair=e.pair,
            claim=e.claim,
            samples=max(e.samples, 100_000) if samples is None else samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=e.name,
            testers=e.testers,
        )
    )


# -- the user's own code --------------------------------------------------------------------


def parse_input(text: str) -> Any:
    """One mechanism input given on the command line: JSON, else a Python literal.

    JSON first (``[1, 2.5]``, ``{"a": 1}``, ``"text"``, ``NaN``), then :func:`ast.literal_eval`
    (tuples, ``None``, ``True``, single-quoted strings, ``1e3``). Nothing is ever executed.
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise typer.BadParameter(
            f"cannot read {text!r} as JSON or as a Python literal (quote strings: '\"abc\"')",
            param_hint="'--pair'",
        ) from None


def load_target(target: str) -> Any:
    """Import ``package.module:name`` or ``path/to/file.py:name`` and return the named object.

    A dotted module is looked up on ``sys.path`` with the current directory first (as
    ``python -m`` does); a path ending in ``.py`` is loaded from that file. ``name`` may be
    dotted (``module:Class.method``, ``module:mechanism``).
    """
    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise typer.BadParameter(
            f"expected module:function or file.py:function, got {target!r}", param_hint="'TARGET'"
        )
    if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise typer.BadParameter(f"no such file: {module_name}", param_hint="'TARGET'")
        name = f"_dpkit_audit_target_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise typer.BadParameter(f"cannot load {module_name} as Python", param_hint="'TARGET'")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # lets the module pickle and import its own names
        spec.loader.exec_module(module)
    else:
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (
                module_name == exc.name or module_name.startswith(exc.name + ".")
            ):
                raise typer.BadParameter(
                    f"no module named {module_name!r} (looked in the "
                    "current directory and on sys.path)",
                    param_hint="'TARGET'",
                ) from None
            raise  # the module exists but one of its own imports failed: show the traceback
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise typer.BadParameter(
                f"{module_name} has no attribute {attribute!r}", param_hint="'TARGET'"
            )
        obj = getattr(obj, part)
    if not callable(obj) and not any(
        callable(getattr(obj, m, None))
        for m in ("sample", "randomize_many", "release_many", "release")
    ):
        raise typer.BadParameter(
            f"{target} is a {type(obj).__name__}, not a function or a mechanism",
            param_hint="'TARGET'",
        )
    return obj


@app.command("code")
def code(
    target: str = typer.Argument(
        ...,
        metavar="TARGET",
        help="the code to audit: package.module:function or path/to/file.py:function; the "
        "function takes one input and returns one output (or a dpkit mechanism object)",
    ),
    pair: tuple[str, str] = typer.Option(
        ...,
        "--pair",
        metavar="X X'",
        help="two neighbouring inputs, each JSON or a Python literal, e.g. --pair '[1, 2]' "
        "'[1, 3]'",
    ),
    epsilon: float | None = typer.Option(None, "--epsilon", help="claimed epsilon"),
    delta: float = typer.Option(0.0, "--delta", help="claimed delta (with --epsilon)"),
    mu: float | None = typer.Option(None, "--mu", help="claimed mu (mu-GDP), instead of --epsilon"),
    vectorized: bool = typer.Option(
        False,
        "--vectorized",
        help="the function is f(x, size) and returns size independent outputs at once (faster)",
    ),
    samples: int = typer.Option(100_000, "--samples", help="outputs drawn per input"),
    confidence: float = CONFIDENCE,
    seed: int | None = SEED,
    plot: Path | None = PLOT,
) -> None:
    """Audit your own code: run it many times on two neighbouring inputs and test its claim.

    The function is called with each input of --pair (samples times each, or in batches with
    --vectorized) and its outputs are compared. A "violated" verdict (exit code 1) proves, at
    the stated confidence, that the code is not as private as claimed; "no violation found"
    (exit code 0) is evidence, not a proof. --seed seeds only the audit's own random split: the
    audited code draws its own noise.
    """
    if mu is not None:
        if epsilon is not None or delta != 0.0:
            raise typer.BadParameter("give either --epsilon (and optionally --delta) or --mu")
        claim = Claim.gdp(mu=mu)
    elif epsilon is None:
        raise typer.BadParameter("give either --epsilon (and optionally --delta) or --mu")
    elif delta == 0.0:
        claim = Claim.pure(epsilon=epsilon)
    else:
        claim = Claim.approx(epsilon=epsilon, delta=delta)
    x, y = parse_input(pair[0]), parse_input(pair[1])
    fn = load_target(target)
    _finish(
        run_audit(
            fn,
            pair=(x, y),
            claim=claim,
            samples=samples,
            confidence=confidence,
            seed=seed,
            plot=plot,
            title=target,
            vectorized=vectorized,
        )
    )
