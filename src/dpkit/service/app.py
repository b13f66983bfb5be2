"""The curator service: an HTTP API in front of one table and its privacy budget.

:func:`create_app` builds the FastAPI application from a :class:`ServiceConfig`. The data's
whole budget is a durable :class:`~dpkit.accounting.Budget` in a ledger (SQLite or PostgreSQL);
each analyst spends a sub-budget under it, so however analysts (and service processes sharing
the ledger) interleave, the total is never exceeded. A charge is written to the ledger before
the release is computed, and the release is returned only after that.

Endpoints (all documented on ``/docs``; analysts authenticate with ``Authorization: Bearer``):

* ``GET /v1/me``: the analyst's budget, spent and remaining;
* ``GET /v1/schema``: the table's column names and types (no rows);
* ``POST /v1/summarize``: noise and cost of a query, without touching data or spending;
* ``POST /v1/query``: charge the analyst's sub-budget, run the query, return the private
  result with its confidence intervals and the budget left;
* ``GET /v1/queries`` and ``GET /v1/queries/{id}``: the analyst's own queries and results;
* ``GET /curator`` (web page) and ``GET /curator/status`` (JSON): for the curator's token only;
* ``GET /healthz``: liveness, no authentication and no data.

Limits: request bodies above ``max_body_bytes`` are refused with 413 and never stored;
each token gets ``rate`` requests per second on average (bursts up to ``burst``), else 429.
A missing or unknown token gets 401 and spends nothing.

Admission: at most ``concurrency`` queries are worked on at once (default: eight per core,
:func:`default_concurrency`); the others wait in arrival order (:class:`FifoGate`). Under many
concurrent analysts this keeps a request's latency close to the queue ahead of it, instead of
letting all of them share the cores at once and finish in whatever order the scheduler and
the locks pick. A query gives its place back before its answer's log entry is committed
(waiting for the disk takes no core).
"""

import asyncio
import contextlib
import json
import math
import os
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dpkit._numeric.display import left, rounded
from dpkit._numeric.validation import check_delta, check_epsilon, check_positive
from dpkit.analytics.session import UNSET
from dpkit.errors import (
    BudgetExceededError,
    BudgetUnavailableError,
    DPKitError,
    LedgerError,
    PrivacyParameterError,
)
from dpkit.service._spec import (
    QueryRequest,
    build_query,
    frame_to_json,
    privacy_parameters,
    summary_to_json,
)
from dpkit.service._state import ServiceState, StateError, Token

__all__ = ["FifoGate", "ServiceConfig", "create_app"]

_CURATOR_COOKIE = "dpkit_curator"


@dataclass(frozen=True)
class ServiceConfig:
    """What ``dpkit serve`` starts: data, privacy unit, total budget, ledger and limits.

    ``state_url`` (tokens and the query log) defaults to ``ledger_url``. ``cache`` loads a
    Parquet source into memory once (later queries scan memory, not the file).
    ``privacy_unit`` must be given: the column identifying a person, or ``None`` written out
    when every row is a different person (left out, the service refuses to start).
    """

    data: str
    budget_epsilon: float
    budget_delta: float = 0.0
    privacy_unit: str | None = UNSET
    ledger_url: str = "sqlite:///budget.db"
    state_url: str | None = None
    budget_name: str = "budget"
    method: str = "basic"
    rate: float = 20.0
    burst: int = 40
    max_body_bytes: int = 10 * 1024 * 1024
    cache: bool = True
    alpha: float = 0.05
    concurrency: int | None = None


# ---------------------------------------------------------------------- body size limit
class BodyLimit:
    """ASGI middleware: a body longer than ``limit`` bytes gets 413 and is never stored.

    A declared ``Content-Length`` above the limit is refused before the application sees the
    request; a chunked body is counted as it arrives and refused at the first byte past it.
    Before the answer, up to :data:`DRAIN_BYTES` more of the body are read and dropped: a
    server that closes its socket with unread bytes in it sends a TCP reset, and a client still
    writing its body may then lose the 413 itself (seen under load). A body longer than that
    still gets its 413 and the connection closes.
    """

    #: Most bytes of a refused body read and dropped before the 413 is sent.
    DRAIN_BYTES = 64 * 1024 * 1024

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _drain(self, receive: Any, more: bool) -> None:
        """Read and drop what is left of the body, up to :data:`DRAIN_BYTES`."""
        dropped = 0
        while more and dropped <= self.DRAIN_BYTES:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            dropped += len(msg.get("body", b""))
            more = bool(msg.get("more_body", False))

    async def _refuse(self, send: Any, status: int, detail: str) -> None:
        body = ('{"detail": "' + detail + '"}').encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    n = int(v)
                except ValueError:
                    await self._refuse(send, 400, "bad Content-Length")
                    return
                if n > self.limit:
                    await self._drain(receive, True)
                    await self._refuse(send, 413, f"request body above {self.limit} bytes")
                    return
        seen = 0
        started = False
        refused = False

        async def receive_limited() -> Any:
            nonlocal seen, refused, started
            if refused:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    # Answer 413 at once and tell the application the client went away, so it
                    # stops reading (its own error responses are then dropped).
                    refused = True
                    if not started:
                        started = True
                        await self._drain(receive, bool(msg.get("more_body", False)))
                        await self._refuse(send, 413, f"request body above {self.limit} bytes")
                    return {"type": "http.disconnect"}
            return msg

        async def send_tracked(msg: Any) -> None:
            nonlocal started
            if refused:
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        await self.app(scope, receive_limited, send_tracked)


# ---------------------------------------------------------------------- admission
class FifoGate:
    """At most ``slots`` holders at once; the others are admitted in the order they arrived.

    A freed slot is handed directly to the longest waiter (never to a newcomer that happens to
    grab a lock first), so a request waits for exactly the requests that arrived before it.
    Python's own locks and semaphores promise no order, and under 32 concurrent requests on
    two cores their unfairness is where the latency tail comes from.
    """

    def __init__(self, slots: int) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise PrivacyParameterError(f"concurrency must be a positive integer, got {slots!r}")
        self.slots = slots
        self._busy = 0
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        """How many callers wait for a slot."""
        with self._lock:
            return len(self._waiting)

    @property
    def busy(self) -> int:
        """How many slots are held."""
        with self._lock:
            return self._busy

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the block (waiting in line for it if all are held)."""
        with self._lock:
            if self._busy < self.slots and not self._waiting:
                self._busy += 1
                turn = None
            else:
                turn = threading.Event()
                self._waiting.append(turn)
        if turn is not None:
            turn.wait()  # the releasing holder passed its slot to us (busy unchanged)
        try:
            yield
        finally:
            with self._lock:
                if self._waiting:
                    self._waiting.popleft().set()
                else:
                    self._busy -= 1


def default_concurrency() -> int:
    """Queries worked on at once by default: eight per core, at least 8.

    Most of them wait for a commit rather than compute: the charges queued behind one are
    written together (one transaction, one disk sync), so several waiting per core keep both
    the cores and the commit groups full. With two per core, too few charges queued up to
    share a commit, and the cores idled while every admitted query waited for the disk."""
    return max(8, 8 * (os.cpu_count() or 1))


# ---------------------------------------------------------------------- rate limit
class RateLimiter:
    """A token bucket per key: ``rate`` requests per second on average, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = check_positive(rate, "rate")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise PrivacyParameterError(f"burst must be a positive integer, got {burst!r}")
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            level, last = self._buckets.get(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - last) * self.rate)
            if level < 1.0:
                self._buckets[key] = (level, now)
                return False
            self._buckets[key] = (level - 1.0, now)
            return True


@dataclass(frozen=True)
class Prepared:
    """What a request body decides before any data or budget is touched: the priced query
    (its plans' salts to be replaced per release), the checked epsilon and delta, and the
    request as the query log stores it."""

    query: Any  # a PreparedQuery
    epsilon: float
    delta: float | None
    request_text: str


class PreparedCache:
    """Prepared queries by request body, the ``size`` most recently used.

    The key is the ``repr`` of the validated body (every field of the request: the query,
    epsilon and delta, so two bodies share an entry only if they ask for the same release at
    the same price; unlike JSON, ``repr`` tells NaN, infinities, ``-0.0``, ``1``, ``1.0`` and
    ``True`` apart); the session, table schema and accounting are the service's, fixed at
    start. An entry spares a repeated query its parsing, checks, pricing and planning; the
    charge, the engine's check and the release still happen on every request, each release
    with a fresh salt (:meth:`~dpkit.analytics.PreparedQuery.with_fresh_salt`). A refused
    body is never stored: it is refused again, unspent, each time.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[str, Prepared] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Prepared | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: str, value: Prepared) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def _json_bytes(content: Any) -> bytes:
    """``content`` as the JSON a :class:`JSONResponse` would send (compact, UTF-8, no NaN)."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _pair(x: Any) -> Any:
    """A pair as exact JSON numbers (non-finite values as null)."""
    if isinstance(x, tuple):
        return [None if (isinstance(v, float) and not math.isfinite(v)) else v for v in x]
    return x


def _shown(x: Any, of: Any = None) -> Any:
    """A pair for people: each number rounded to 6 significant digits, a remaining residue
    at most 1e-9 of its total (``of``) as 0 (see :mod:`dpkit._numeric.display`)."""
    exact = _pair(x)
    if not isinstance(exact, list):
        return exact
    totals = list(of) if isinstance(of, (tuple, list)) else [None] * len(exact)
    return [
        None if v is None else rounded(left(v, t) if of is not None else v)
        for v, t in zip(exact, totals, strict=False)
    ]


def _amounts(**pairs: tuple[Any, Any]) -> dict[str, Any]:
    """``name: rounded pair`` and ``name_exact: exact pair`` for each ``name=(pair, total)``."""
    out: dict[str, Any] = {}
    for name, (pair, of) in pairs.items():
        out[name] = _shown(pair, of)
        out[f"{name}_exact"] = _pair(pair)
    return out


class Curator:
    """The service's state: the session, the ledger budgets, tokens and the query log."""

    def __init__(self, config: ServiceConfig) -> None:
        from dpkit.accounting import Budget
        from dpkit.analytics import Session
        from dpkit.ledger import open_ledger

        self.config = config
        eps = check_epsilon(config.budget_epsilon, name="budget epsilon")
        delta = check_delta(config.budget_delta, name="budget delta")
        self.state = ServiceState(config.state_url or config.ledger_url)
        self.ledger = open_ledger(config.ledger_url)
        # the query log and the charges in one SQLite file: their writes take turns on one lock
        self.state.take_turns_with(self.ledger)
        self.total = Budget(
            epsilon=eps,
            delta=delta,
            method=config.method,
            ledger=self.ledger,
            name=config.budget_name,
        )
        self._subs: dict[str, Any] = {}
        self._subs_lock = threading.Lock()
        source: Any = config.data
        if config.cache and str(config.data).lower().endswith((".parquet", ".parq", ".pq")):
            import pyarrow.parquet as pq

            source = pq.read_table(config.data)
        # Queries are priced by the total's kind of accounting and charged, by Session.run,
        # to the analyst's sub-budget of it.
        self.session = Session(
            source, privacy_unit=config.privacy_unit, budget=self.total, alpha=config.alpha
        )
        self.schema = dict(self.session.table.types)
        self.limiter = RateLimiter(config.rate, config.burst)
        self.gate = FifoGate(
            default_concurrency() if config.concurrency is None else config.concurrency
        )
        self.prepared = PreparedCache()

    def sub_budget(self, token: Token) -> Any:
        """The analyst's sub-budget (opened once); an unreadable ledger is a 503."""
        try:
            return self._sub_budget(token)
        except LedgerError as exc:
            raise HTTPException(
                status_code=503, detail=f"budget ledger unavailable: {exc}"
            ) from None

    def _sub_budget(self, token: Token) -> Any:
        with self._subs_lock:
            sub = self._subs.get(token.name)
            if sub is None:
                caps: dict[str, Any] = {"epsilon": token.epsilon}
                if token.delta is not None:
                    caps["delta"] = token.delta
                sub = self.total.sub_budget(token.name, **caps)
                self._subs[token.name] = sub
            return sub

    def analyst_status(self, token: Token) -> dict[str, Any]:
        sub = self.sub_budget(token)
        sub.refresh()
        return {
            "analyst": token.name,
            **_amounts(
                budget=(sub.budget, None),
                spent=(sub.spent, None),
                remaining=(sub.remaining, sub.budget),
            ),
        }

    def report(self, analyst: str | None = None) -> Any:
        """The privacy report (:func:`dpkit.risk.report`) as the ledger holds it now: of the
        total budget (the total's risk and a row for each analyst), or of one analyst's
        releases; an analyst without a sub-budget is a 404."""
        from dpkit.risk import report

        self.total.refresh()
        if analyst is None:
            return report(self.session)
        if analyst not in self.total.sub_budgets():
            raise HTTPException(status_code=404, detail=f"no analyst named {analyst!r}")
        return report(self.total.sub_budget(analyst))

    def status(self) -> dict[str, Any]:
        """Everything the curator's page shows (no data values beyond released ones)."""
        self.total.refresh()
        history = [
            {
                "seq": r.seq,
                "time": r.time,
                "analyst": r.analyst,
                "spent_after": _pair(tuple(r.spent_after)),
                "metadata": dict(r.metadata),
            }
            for r in self.total.history()
        ]
        analysts = []
        for t in self.state.tokens():
            if t.role != "analyst":
                continue
            entry: dict[str, Any] = {
                "analyst": t.name,
                "revoked": t.revoked,
                "cap": [t.epsilon, t.delta or 0.0],
            }
            entry["spent"] = _pair(self.sub_budget(t).spent)
            analysts.append(entry)
        return {
            "data": Path(self.config.data).name,
            "privacy_unit": self.config.privacy_unit,
            **_amounts(
                budget=(self.total.budget, None),
                spent=(self.total.spent, None),
                remaining=(self.total.remaining, self.total.budget),
            ),
            "history": history,
            "analysts": analysts,
            "queries": self.state.queries(),
        }


class CuratorSessions:
    """Server-side sessions of the curator's page: a random id (256 bits from dpkit's secure
    source) maps to the curator token's record until it expires or the curator logs out.

    The cookie carries only the id, so a copied cookie dies at logout or after ``ttl``
    seconds, and the curator token itself never sits in the browser.
    """

    def __init__(self, ttl: float = 8 * 3600.0) -> None:
        self.ttl = ttl
        self._live: dict[str, tuple[Token, float]] = {}
        self._lock = threading.Lock()

    def open(self, tok: Token) -> str:
        from dpkit.service._state import new_token

        sid = new_token()
        now = time.monotonic()
        with self._lock:
            self._live = {k: v for k, v in self._live.items() if v[1] > now}
            self._live[sid] = (tok, now + self.ttl)
        return sid

    def get(self, sid: str | None) -> Token | None:
        if not sid:
            return None
        with self._lock:
            entry = self._live.get(sid)
            if entry is None:
                return None
            if entry[1] <= time.monotonic():
                del self._live[sid]
                return None
            return entry[0]

    def close(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._live.pop(sid, None)


def _auth_error() -> HTTPException:
    return HTTPException(
        status_code=401,
        detail="missing or unknown bearer token",
        headers={"WWW-Authenticate": "Bearer"},
    )


def create_app(config: ServiceConfig) -> FastAPI:
    """The FastAPI application of the curator service (opens the ledger and the data)."""
    from dpkit.service._page import login_page, render_page

    cur = Curator(config)
    app = FastAPI(
        title="dpkit curator service",
        description=(
            "Differentially private answers to queries over one table. Each analyst "
            "spends a sub-budget of the table's privacy budget; every charge is "
            "recorded in a durable ledger before the answer is computed."
        ),
        version="1",
    )
    app.state.curator = cur
    sessions = CuratorSessions()
    bearer = HTTPBearer(
        auto_error=False, description="An analyst's token (issued by `dpkit serve token add`)."
    )

    def analyst(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Token:
        try:
            tok = cur.state.authenticate(None if creds is None else creds.credentials)
        except StateError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None
        if tok is None or tok.role != "analyst":
            raise _auth_error()
        if not cur.limiter.allow(tok.token_hash):
            raise HTTPException(
                status_code=429, detail="rate limit: slow down", headers={"Retry-After": "1"}
            )
        return tok

    def curator_token(request: Request) -> Token | None:
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header.lower().startswith("bearer ") else None
        try:
            if presented is None:
                # The page cookie is a server-side session id, never the token itself.
                tok = sessions.get(request.cookies.get(_CURATOR_COOKIE))
                if tok is not None:  # re-read: a revoked curator token ends its sessions
                    tok = cur.state.authenticate_hash(tok.token_hash)
            else:
                tok = cur.state.authenticate(presented)
        except (StateError, LedgerError) as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None
        if tok is None or tok.role != "curator":
            return None
        if not cur.limiter.allow(tok.token_hash):
            raise HTTPException(
                status_code=429, detail="rate limit: slow down", headers={"Retry-After": "1"}
            )
        return tok

    @app.exception_handler(PrivacyParameterError)
    async def _bad_parameter(request: Request, exc: PrivacyParameterError) -> JSONResponse:
        return JSONResponse({"detail": f"invalid query: {exc}"}, status_code=422)

    @app.exception_handler(LedgerError)
    async def _ledger_down(request: Request, exc: LedgerError) -> JSONResponse:
        # The ledger (or its database) cannot be read: the service is unavailable, not broken.
        return JSONResponse({"detail": f"budget ledger unavailable: {exc}"}, status_code=503)

    @app.exception_handler(StateError)
    async def _state_down(request: Request, exc: StateError) -> JSONResponse:
        return JSONResponse({"detail": f"service tables unavailable: {exc}"}, status_code=503)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {
                "loc": list(e.get("loc", ())),
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.get("/healthz", tags=["service"], summary="Liveness (no authentication, no data)")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/me", tags=["analyst"], summary="Your budget, spent and remaining")
    def me(tok: Annotated[Token, Depends(analyst)]) -> dict[str, Any]:
        return cur.analyst_status(tok)

    @app.get("/v1/schema", tags=["analyst"], summary="Column names and types (no rows)")
    def schema(tok: Annotated[Token, Depends(analyst)]) -> dict[str, Any]:
        return {
            "privacy_unit": config.privacy_unit,
            "columns": cur.schema,
            "accounting": cur.session.mode,
            "alpha": cur.session.alpha,
        }

    def _overflow(exc: ArithmeticError) -> HTTPException:
        return HTTPException(
            status_code=422,
            detail=(
                f"invalid query: the pricing overflowed ({type(exc).__name__}); epsilon, delta or "
                "a bound is too large"
            ),
        )

    def _prepare(body: QueryRequest) -> tuple[Any, float, float | None]:
        eps, delta = privacy_parameters(body)
        try:
            q = build_query(cur.session, body)
        except PrivacyParameterError:
            raise
        except DPKitError as exc:
            raise HTTPException(status_code=422, detail=f"invalid query: {exc}") from None
        return q, eps, delta

    @app.post(
        "/v1/summarize",
        tags=["analyst"],
        summary="Noise and cost of a query (touches no data, spends nothing)",
    )
    def summarize(body: QueryRequest, tok: Annotated[Token, Depends(analyst)]) -> dict[str, Any]:
        q, eps, delta = _prepare(body)
        try:
            frame = q.summarize(epsilon=eps, delta=delta)
        except (OverflowError, ZeroDivisionError) as exc:
            raise _overflow(exc) from None
        except DPKitError as exc:
            raise HTTPException(status_code=422, detail=f"invalid query: {exc}") from None
        return {"summary": summary_to_json(frame), "cost": {"epsilon": 0.0, "delta": 0.0}}

    def _prepared(body: QueryRequest) -> Prepared:
        """The body's prepared query: from the cache when the same body was prepared before,
        else checked, priced and planned now (and cached). Raises what refuses the body."""
        # repr, not JSON: it tells NaN, infinities, -0.0, 1, 1.0 and True apart
        key = repr(body.model_dump())
        hit = cur.prepared.get(key)
        if hit is not None:
            return hit
        q, eps, delta = _prepare(body)
        try:
            # Priced and planned before anything is logged or charged: an overflow there is
            # the analyst's parameters, refused unspent.
            query = q.prepare(epsilon=eps, delta=delta, two_step=True)
        except (OverflowError, ZeroDivisionError) as exc:
            raise _overflow(exc) from None
        except DPKitError as exc:
            raise HTTPException(status_code=422, detail=f"invalid query: {exc}") from None
        request = body.model_dump(mode="json", exclude_none=True)
        entry = Prepared(query, eps, delta, json.dumps(request, sort_keys=True))
        cur.prepared.put(key, entry)
        return entry

    @app.post(
        "/v1/query",
        tags=["analyst"],
        summary="Charge your sub-budget, run the query, return the private result",
        response_class=JSONResponse,
    )
    def query(body: QueryRequest, tok: Annotated[Token, Depends(analyst)]) -> Response:
        with cur.gate.slot():  # in arrival order, a bounded number at once
            qid, result, result_text, remaining = _query(body, tok)
        # The answer's log entry is committed after the slot is given back: waiting for the
        # disk takes no core, and the next request in line starts meanwhile.
        return _send(qid, result, result_text, remaining)

    def _query(body: QueryRequest, tok: Token) -> tuple[str, dict[str, Any], bytes, Any]:
        """Charge and run the query: its id, its result (also as JSON) and what remains of the
        analyst's budget after its charge (``remaining=`` of :func:`_amounts`)."""
        entry = _prepared(body)
        eps, delta = entry.epsilon, entry.delta
        # every release its own secret salt (the cached plans' are never run)
        prepared = entry.query.with_fresh_salt(cur.session.source_of_randomness)
        sub = cur.sub_budget(tok)
        qid = uuid.uuid4().hex
        try:
            # Logged before the charge, or in the charge's own transaction when the query log
            # shares the ledger's SQLite file: a full disk refuses the query, unspent.
            cur.state.log_pending(
                qid, tok.name, "run", None, eps, delta, request_text=entry.request_text
            )
        except StateError as exc:
            raise HTTPException(
                status_code=503, detail=f"query refused, nothing spent: {exc}"
            ) from None
        try:
            # No lock: requests run in parallel threads (the engine gives each thread a DuckDB
            # cursor of its own); the budget serialises its check-then-commit itself.
            frame = cur.session.run(prepared, budget=sub, metadata={"query_id": qid})
        except BudgetExceededError as exc:
            _log_quietly(cur, qid, "refused", str(exc))
            # Session.run re-raises a refused charge with the budget's own error as cause: a
            # ledger that cannot be written (full disk, lost database) is 503, not "spent".
            unavailable = isinstance(exc, BudgetUnavailableError) or isinstance(
                exc.__cause__, BudgetUnavailableError
            )
            raise HTTPException(status_code=503 if unavailable else 403, detail=str(exc)) from None
        except PrivacyParameterError as exc:
            _log_quietly(cur, qid, "refused", str(exc))
            raise
        except (OverflowError, ZeroDivisionError) as exc:
            _log_quietly(cur, qid, "failed", repr(exc))
            raise _overflow(exc) from None
        except DPKitError as exc:
            _log_quietly(cur, qid, "failed", str(exc))
            raise HTTPException(status_code=422, detail=f"query failed: {exc}") from None
        result = frame_to_json(frame)
        # What remains as of this charge (the budget read the ledger just before writing it);
        # no re-read here: it would wait for the ledger's lock behind other requests' charges.
        remaining = (sub.remaining, sub.budget)
        # encoded once: the same text goes to the query log and into the response
        return qid, result, _json_bytes(result), remaining

    def _send(qid: str, result: dict[str, Any], result_text: bytes, remaining: Any) -> Response:
        """Log the query answered (committed before anything is sent), then the response."""
        try:
            cur.state.log_done(qid, "answered", result_text=result_text.decode())
        except StateError as exc:
            # Charged already (conservative); without its log entry the answer is withheld.
            raise HTTPException(status_code=503, detail=f"answer withheld: {exc}") from None
        release = result["release"]
        charged = (release.get("epsilon"), release.get("delta"))
        # what was charged (a delta the query was allowed but did not use is not charged),
        # rounded for people, exact in *_exact, and what the query was allowed
        cost = {
            "epsilon": rounded(charged[0]),
            "delta": rounded(charged[1]),
            "epsilon_exact": charged[0],
            "delta_exact": charged[1],
            "allowed": release.get("requested"),
        }
        rest = _json_bytes({"cost": cost, **_amounts(remaining=remaining)})
        # {"query_id": ..., "result": ..., "cost": ..., "remaining": ..., ...}
        content = b"".join(
            (
                b'{"query_id":',
                _json_bytes(qid),
                b',"result":',
                result_text,
                b",",
                rest[1:],
            )
        )
        return Response(content, media_type="application/json")

    @app.get("/v1/queries", tags=["analyst"], summary="Your queries and their results")
    def my_queries(tok: Annotated[Token, Depends(analyst)]) -> dict[str, Any]:
        return {"queries": cur.state.queries(tok.name)}

    @app.get("/v1/queries/{query_id}", tags=["analyst"], summary="One of your queries")
    def my_query(query_id: str, tok: Annotated[Token, Depends(analyst)]) -> dict[str, Any]:
        for item in cur.state.queries(tok.name):
            if item["id"] == query_id:
                return item
        raise HTTPException(status_code=404, detail="no such query of yours")

    @app.get(
        "/curator/status",
        tags=["curator"],
        summary="Budget, its history, per-analyst spend and the query log (JSON)",
    )
    def curator_status(request: Request) -> dict[str, Any]:
        if curator_token(request) is None:
            raise _auth_error()
        return cur.status()

    @app.get(
        "/curator",
        tags=["curator"],
        response_class=HTMLResponse,
        summary="The curator's web page (login form without a curator token)",
    )
    def curator_page(request: Request) -> HTMLResponse:
        if curator_token(request) is None:
            return HTMLResponse(login_page(), status_code=401)
        return HTMLResponse(render_page(cur.status()))

    @app.get(
        "/curator/report",
        tags=["curator"],
        response_class=HTMLResponse,
        summary="The privacy report of the total budget, or of one analyst with ?analyst= (HTML)",
    )
    def curator_report(request: Request, analyst: str | None = None) -> HTMLResponse:
        if curator_token(request) is None:
            return HTMLResponse(login_page(), status_code=401)
        return HTMLResponse(
            cur.report(analyst).to_html(analyst_link="/curator/report?analyst={analyst}")
        )

    @app.get(
        "/curator/report.json",
        tags=["curator"],
        summary="The privacy report of the total budget, or of one analyst with ?analyst= (JSON)",
    )
    def curator_report_json(request: Request, analyst: str | None = None) -> Response:
        if curator_token(request) is None:
            raise _auth_error()
        return Response(cur.report(analyst).to_json(), media_type="application/json")

    @app.post(
        "/curator/login",
        tags=["curator"],
        summary="Exchange the curator token (form field `token`) for a page cookie",
    )
    async def curator_login(request: Request) -> Response:
        raw = await request.body()
        form = parse_qs(raw.decode("utf-8", "replace"))
        presented = (form.get("token") or [""])[0].strip()
        try:
            tok = await asyncio.to_thread(cur.state.authenticate, presented)
        except StateError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None
        if tok is None or tok.role != "curator":
            return HTMLResponse(login_page("unknown curator token"), status_code=401)
        resp = RedirectResponse("/curator", status_code=303)
        resp.set_cookie(
            _CURATOR_COOKIE,
            sessions.open(tok),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/curator",
            max_age=int(sessions.ttl),
        )
        return resp

    @app.post("/curator/logout", tags=["curator"], summary="End the page session")
    def curator_logout(request: Request) -> Response:
        sessions.close(request.cookies.get(_CURATOR_COOKIE))
        resp = RedirectResponse("/curator", status_code=303)
        resp.delete_cookie(_CURATOR_COOKIE, path="/curator")
        return resp

    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    return app


def _log_quietly(cur: Curator, qid: str, status: str, error: str) -> None:
    with contextlib.suppress(StateError):  # the refusal itself is what the analyst gets
        cur.state.log_done(qid, status, error=error)
