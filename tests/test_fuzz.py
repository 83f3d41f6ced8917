"""Property-based fuzzing of the command line (Hypothesis): hostile suites, labels, thresholds,
hyperparameters and store URLs through validation, ``run --dry-run``, ``status``, ``run``
(of suites or stores that must be refused), ``report`` and ``recommend``.

Invariants, for every generated input:
- no traceback, and no "internal error" (a failure bench did not foresee);
- success, or a non-zero exit with one line (suite validation: one line per problem,
  each naming the file);
- never an exit of 0 with nothing stored (a run that "succeeds" on a store that keeps nothing);
- never a store file created for a suite that failed validation, or by a read-only command.

The CI share is about a minute (the ``ci`` profile); ``nox -s fuzz`` runs the ``fuzz``
profile with many more examples. ``HYPOTHESIS_PROFILE=fuzz pytest tests/test_fuzz.py`` too.
"""

from __future__ import annotations

import math
import os
import socket
import tempfile
from html import escape
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from synthetic import Planted, write_store

from bench.cli import app
from bench.suites.suite import SuiteError, load_suite

_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False, print_blob=True)
settings.register_profile("ci", max_examples=200, **_COMMON)
settings.register_profile("fuzz", max_examples=5000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
#: A suite example takes about 0.07 s (in-process CLI), a report example several seconds (a report and a
#: recommend): reports get this fraction of the profile's examples (5 in the default run, 50 under
#: `nox -s fuzz`, whose profile has ten times the examples).
REPORT_SHARE = 0.01


# --------------------------------------------------------------------------- #
# Strategies
# --------------------------------------------------------------------------- #
HOSTILE_TEXT = ["[/]", "[bold]x[/bold]", "[nan]", "$\\alpha^$", "$", "_hidden", "<b>x</b>", "a\nb", "a\x00b",
                "x" * 129, "é" * 128, "", " ", "\t", "'\"", "{{ x }}", "%s", "../../etc", "\u202e"]
TEXT = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40))
NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**20, 1e308, -0.0]),
)
SMALL = st.integers(min_value=-2, max_value=64)
VALUE = st.one_of(NUMBER, SMALL, TEXT, st.none(), st.booleans(), st.lists(SMALL, max_size=3),
                  st.dictionaries(st.sampled_from(["pi", "vf", "x"]), st.lists(SMALL, max_size=2), max_size=2))
ENV_IDS = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "NoSuchEnv-v0", "ALE/Pong-v5"]
HYPER = ["n_envs", "n_steps", "learning_rate", "gamma", "gae_lambda", "ent_coef", "net_arch", "kernel", "device",
         "batch_size", "n_epochs", "clip_range", "max_kl", "normalize", "nonsense"]
HOSTILE_FILES = [
    "name: x\na: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
    "name: &x [*x]\n", "a: &x {b: *x}\n", "[" * 500 + "]" * 500, "", "---\n...\n", "!!python/object/apply:os.system ['true']\n",
    "name: x\nname: y\n", "\ufeffname: x\n", "- 1\n- 2\n", "name: *undefined\n", "name: 'unterminated\n",
]


@st.composite
def suite_dicts(draw) -> dict:
    d: dict = {}
    d["name"] = draw(st.one_of(st.sampled_from(["fz", "a.b-c_1", "n" * 64]), TEXT))
    d["seeds"] = draw(st.one_of(st.integers(-2, 4), st.lists(st.one_of(st.integers(-1, 5), NUMBER), max_size=3),
                                st.sampled_from([10**9, 2**31]), TEXT))
    defaults = {"timesteps": draw(st.one_of(st.integers(-10, 5000), NUMBER, TEXT))}
    if draw(st.booleans()):
        defaults["window"] = draw(st.one_of(SMALL, NUMBER))
    d["defaults"] = defaults
    envs = []
    for _ in range(draw(st.integers(1, 2))):
        e = {"id": draw(st.one_of(st.sampled_from(ENV_IDS), TEXT))}
        if draw(st.booleans()):
            e["threshold"] = draw(st.one_of(NUMBER, st.none(), TEXT))
        envs.append(e)
    d["envs"] = envs
    algos = []
    for _ in range(draw(st.integers(1, 2))):
        a = {"algo": draw(st.sampled_from(["ppo", "a2c", "trpo", "reinforce", "dqn", "ddpg"])),
             "impl": draw(st.sampled_from(["bench", "sb3", "other"]))}
        if draw(st.booleans()):
            a["label"] = draw(TEXT)
        a["hyperparams"] = draw(st.dictionaries(st.sampled_from(HYPER), VALUE, max_size=3))
        algos.append(a)
    d["algorithms"] = algos
    for key in draw(st.lists(st.sampled_from(["name", "seeds", "envs", "algorithms", "defaults"]), max_size=1)):
        d.pop(key, None)  # sometimes a required key is missing
    if draw(st.integers(0, 9)) == 0:
        d[draw(TEXT)] = draw(VALUE)  # an unknown key
    return d


SUITE_TEXT = st.one_of(
    suite_dicts().map(lambda d: yaml.safe_dump(d, allow_unicode=True, sort_keys=False)),
    suite_dicts().map(lambda d: yaml.safe_dump(d, allow_unicode=False, default_flow_style=True)),
    st.sampled_from(HOSTILE_FILES),
    st.text(max_size=200),
)

VALID_SUITE = ("name: fz\nseeds: 1\ndefaults:\n  timesteps: 256\nenvs:\n- id: CartPole-v1\nalgorithms:\n"
               "- algo: ppo\n  impl: bench\n  hyperparams: {}\n")

URL_KINDS = ["fresh", "existing", "memory", "memory-uri", "other-scheme", "garbage", "folder", "text-file",
             "wrong-pg-port", "query-path", "percent-path"]
#: SQLite URLs that bench refuses rather than read as another path (a '?' starts SQLAlchemy's query, '%' is decoded).
REFUSED_PATHS = ("query-path", "percent-path")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _url(kind: str, d: Path, existing: str) -> str:
    return {
        "fresh": f"sqlite:///{d / 'fresh' / 'bench.db'}",
        "existing": existing,
        "memory": "sqlite://",
        "memory-uri": "sqlite:///file::memory:?cache=shared",
        "other-scheme": "mysql://u@h/db",
        "garbage": "::not a url::",
        "folder": f"sqlite:///{d}",
        "text-file": f"sqlite:///{d / 'notes.txt'}",
        "wrong-pg-port": f"postgresql://postgres@127.0.0.1:{_free_port()}/bench",
        "query-path": f"sqlite:///{d / 'q?mark' / 'b.db'}",
        "percent-path": f"sqlite:///{d / 'a%20b' / 'b.db'}",
    }[kind]


# --------------------------------------------------------------------------- #
# Invariants
# --------------------------------------------------------------------------- #
def invoke(args: list[str]):
    res = CliRunner().invoke(app, args)
    out, err = res.stdout, res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception), err)
    assert "Traceback" not in out + err, (args, err)
    assert "internal error" not in err, (args, err)
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, err)
    return res.exit_code, out, err


def one_line_or_problems(code: int, err: str, suite: Path) -> None:
    if code == 0:
        return
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines, "a failure with no message"
    assert len(lines) == 1 or all(ln.startswith(f"{suite}:") for ln in lines), lines


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


@pytest.fixture(scope="module")
def existing_store(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'existing.db'}"
    write_store(url, ["CartPole-v1"], [Planted("ppo", "ppo", "bench", 0.9), Planted("[/]a2c", "a2c", "bench", 0.3)],
                seeds=2, episodes=30, suite="fz")
    return url


@given(text=SUITE_TEXT, kind=st.sampled_from(URL_KINDS))
@example(text=VALID_SUITE, kind="fresh")  # valid suites are rare draws: pin one against three store kinds
@example(text=VALID_SUITE, kind="existing")
@example(text=VALID_SUITE, kind="folder")
@pytest.mark.heavy
def test_fuzz_suites_and_store_urls(existing_store, text, kind):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "notes.txt").write_text("not a database\n" * 20)
        suite = d / "suite.yaml"
        suite.write_text(text, encoding="utf-8", errors="surrogatepass")
        url = _url(kind, d, existing_store)
        try:
            loaded = load_suite(suite)
            valid = True
        except SuiteError as e:
            valid = False
            assert e.lines and all(ln.startswith(str(suite)) and "\n" not in ln for ln in e.lines), e.lines
        before = files_under(d)
        usable = kind in ("fresh", "existing")

        code, out, err = invoke(["run", str(suite), "--dry-run", "--store", url])
        one_line_or_problems(code, err, suite)
        if not valid:
            assert code == 2
        elif kind in ("memory", "memory-uri", "other-scheme", "garbage", *REFUSED_PATHS):
            assert code == 2, err
        elif code == 0:
            assert f"{len(loaded.cells)} cells" in out

        code, out, err = invoke(["status", str(suite), "--store", url])
        one_line_or_problems(code, err, suite)
        if valid and kind == "existing":
            assert code == 0, err
        if valid and kind == "fresh":  # status reads; it never creates a store, nor shows a missing one as pending
            assert code == 2 and "no results store at" in err, (code, err)
        if valid and not usable:
            assert code != 0, out  # an unusable store is never shown as "all pending"

        if not valid or not usable:
            code, out, err = invoke(["run", str(suite), "--store", url, "--workers", "1"])
            assert code != 0, out  # never "success" with nothing stored
            one_line_or_problems(code, err, suite)

        assert files_under(d) == before, "a read-only command or a refused suite created files"


LABEL = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=128).filter(
    lambda s: s.strip() != "")


@settings(max_examples=max(3, math.ceil(settings().max_examples * REPORT_SHARE)))
@given(labels=st.lists(st.one_of(st.sampled_from(HOSTILE_TEXT[:8]), LABEL), min_size=1, max_size=3,
                       unique_by=lambda s: s), failed=st.booleans())
def test_fuzz_report_and_recommend_with_hostile_labels(labels, failed):
    labels = [lb for lb in labels if lb.strip() and "\x00" not in lb and "\n" not in lb] or ["plain"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        url = f"sqlite:///{d / 's.db'}"
        algos = [Planted(lb, "ppo" if i % 2 else "a2c", "bench", 0.2 + 0.3 * i) for i, lb in enumerate(labels)]
        write_store(url, ["CartPole-v1"], algos, seeds=2, episodes=20, diag_every=4)
        if failed:  # one failed run beside the done ones
            import sqlalchemy as sa

            with sa.create_engine(url).begin() as c:
                c.execute(sa.text("update runs set status = 'failed', error = :e where seed = 0"),
                          {"e": f"Diverged: [nan] {labels[0]} $x^$"})
        before = files_under(d)
        code, out, err = invoke(["report", "--store", url, "--out", str(d / "rep")])
        assert code == 0, err
        html = (d / "rep" / "index.html").read_text()
        from markupsafe import escape as html_escape  # Jinja's autoescape: ' becomes &#39;

        for lb in labels:
            assert str(html_escape(lb)) in html or escape(lb, quote=False) in html, lb
        code, out, err = invoke(["recommend", "--store", url])
        assert code == 0, err
        assert files_under(d) - before == {"rep", "rep/index.html"}


#: Inside every generated password: no output may hold it (the password itself may be escaped when quoted).
MARK = "Zq7SecretMark"
SCHEMES = ["postgresql", "postgres", "postgresql+psycopg", "mysql", "sqlite", "", "http", "postgresql+nope"]
HOSTS = ["127.0.0.1:notaport", "127.0.0.1:5", "h@x", "", "[::1", "127.0.0.1:99999999", "h:1:2", "127.0.0.1 ",
         "127.0.0.1/b"]
PASS_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


@st.composite
def secret_urls(draw) -> tuple[str, str]:
    """A malformed (or well-formed) store URL with a password holding :data:`MARK`, and its command."""
    secret = draw(st.text(PASS_CHARS, max_size=6)) + MARK + draw(st.text(PASS_CHARS, max_size=6))
    user = draw(st.sampled_from(["postgres", "root", "", "u:v", "a b"]))
    tail = draw(st.sampled_from(["/db", "/", "", "/x?y", "/a%20b", "/q?mark/b.db", "/db?connect_timeout=x"]))
    at = draw(st.sampled_from(["@", "", "@@", "%40"]))
    host = draw(st.sampled_from(HOSTS))
    # With no raw '@' after the password (%40 is none), a raw '@' inside it ends the password by the URL's grammar
    # (RFC 3986: user info runs to an '@'): "u:0@{MARK}127.0.0.1/db" is user "u", password "0" and host
    # "{MARK}127.0.0.1", which bench shows as the host it is. The mark is then not in the password.
    assume("@" in at + host or "@" not in secret)
    url = f"{draw(st.sampled_from(SCHEMES))}://{user}:{secret}{at}{host}{tail}"
    return url, draw(st.sampled_from(["dry-run", "status", "run", "report", "recommend", "export", "import", "tune",
                                      "parity", "eval"]))


@settings(max_examples=max(10, settings().max_examples // 10))
@given(case=secret_urls())
# Found by CI: a non-integer connect_timeout reached libpq's int() as an internal error.
@example(case=(f"postgresql://postgres:{MARK}@127.0.0.1:5/db?connect_timeout=x", "status"))
# Found by CI: no '@', and a password holding '/' and ':' (it was shown from its first '/').
@example(case=(f"postgresql://postgres:/{MARK}127.0.0.1:notaport/db", "dry-run"))
# Found by the fuzz test: a password with a raw leading '@' and no '@host' (it read as an empty password and a host).
@example(case=(f"postgresql://postgres:@{MARK}127.0.0.1:notaport/db", "status"))
# Found by CI: no host means libpq's default server, which on a machine with a local PostgreSQL (trust auth
# ignores the password) was reachable, so `run` succeeded; the test now points that default at no server.
@example(case=(f"postgresql://postgres:{MARK}@/", "run"))
def test_fuzz_no_password_in_any_output(existing_store, case):
    """No output holds the password, and no command succeeds against these URLs, which name no reachable
    server: the empty host falls to libpq's default (``PGHOST``), pointed at a folder with no server."""
    url, command = case
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        suite = d / "suite.yaml"
        suite.write_text("name: fz\nseeds: [0]\ndefaults: {timesteps: 300}\nenvs: [{id: CartPole-v1}]\n"
                         "algorithms: [{algo: a2c, impl: bench, hyperparams: {n_envs: 1, n_steps: 8}}]\n")
        args = {"dry-run": ["run", str(suite), "--dry-run"], "status": ["status", str(suite)],
                "run": ["run", str(suite), "--workers", "1"], "report": ["report", "--out", str(d / "r")],
                "recommend": ["recommend"], "export": ["export", "--out", str(d / "o.csv")],
                "import": ["import", str(Path(__file__).resolve().parent.parent / "results" / "reference" / "sequence")],
                "tune": ["tune", "--algo", "a2c", "--env", "CartPole-v1", "--timesteps", "100", "--trials", "1"],
                "parity": ["parity", "a2c-bench", "ppo-bench"], "eval": ["eval", "abc"],
                }[command]
        with mock.patch.dict(os.environ, {"PGHOST": str(d / "no-server")}):
            code, out, err = invoke([*args, "--store", url])
        assert MARK not in out + err, (url, command, out, err)
        assert code != 0 or command in ("dry-run", "status"), (url, command, out)


# --------------------------------------------------------------------------- #
# An env's faults: whatever goes wrong, one line naming the env, the step and what was wrong
# --------------------------------------------------------------------------- #
_VALUES = st.sampled_from(["nan", "inf", "-inf"])
_FAULT = st.one_of(
    st.fixed_dictionaries({"kind": st.just("reward"), "value": _VALUES}),
    st.fixed_dictionaries({"kind": st.just("observation"), "value": _VALUES, "index": st.integers(0, 2)}),
    st.fixed_dictionaries({"kind": st.just("shape"), "size": st.sampled_from([1, 2, 4, 9])}),
    st.fixed_dictionaries({"kind": st.just("raises"), "text": st.text(min_size=1, max_size=60)}),
)


@settings(max_examples=max(8, settings().max_examples // 50))
@given(fault=_FAULT, at=st.integers(1, 40), algo=st.sampled_from(["a2c", "ppo", "reinforce", "trpo"]))
def test_fuzz_env_faults_are_one_line_naming_env_step_and_quantity(fault, at, algo):
    """A misbehaving env (issue 44): a non-finite reward or observation, a wrong shape or an exception, at any
    step and under any of these own algorithms, fails the cell with one line that names the env and the step,
    never with a traceback or the algorithm's own divergence message."""
    import bad_envs  # noqa: F401 - registers Fault-v0

    from bench.algos.hyperparams import PARAMS
    from bench.envs import env_key
    from bench.run.runner import record_cell
    from bench.suites.suite import Cell

    key = env_key("bad_envs:Fault-v0", {**fault, "at": at})
    params = PARAMS[algo]().model_dump(mode="json") | {"n_envs": 1, "n_steps": 8}
    if algo in ("ppo", "trpo"):
        params |= {"batch_size": 8}
    _, error = record_cell(Cell("s", key, algo, "bench", algo, 0, 200, None, 5, None, params))
    assert error is not None and "\n" not in error and "Traceback" not in error, error
    assert error.startswith(f"env {key} ") and f"at step {at}" in error, error
    what = {"reward": "reward", "observation": "observation", "shape": "shape", "raises": "raised RuntimeError"}
    assert what[fault["kind"]] in error, error
