"""Issue 11: every malformed config, override, design or path is refused before any work, in
one line that names the file and the key, with exit code 2 and no traceback.

The property test runs ``ma`` in-process (``market_agents.cli.main``) on generated malformed
input; the simulation is replaced by a tripwire (no input may reach it) and a watchdog on the
process's CPU time stops an example after 5 s (CPU time, so a loaded machine cannot make it
flaky). Every example that ever failed is kept as an ``@example`` (``CORPUS``); a few run
through a real ``ma`` process.
"""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import market_agents.sim.runner  # noqa: F401  (patched by name below)
from market_agents.cli import main
from tests.support import ROOT

BASELINE = ROOT / "config" / "baseline.yaml"
PRICES = ROOT / "config" / "prices.yaml"
CPU_SECONDS = 5

FLOAT_KEYS = [
    "fundamentals.v0", "fundamentals.sigma", "fundamentals.jump_prob", "fundamentals.jump_sigma",
    "exchange.tick_size", "exchange.max_leverage", "exchange.maintenance_margin",
    "exchange.halt_threshold", "population.llm_share", "population.initial_cash",
    "population.mm_initial_cash", "population.leveraged_cash", "population.mix.noise",
    "population.llm.usd_cap", "population.llm.temperature", "population.llm.provider_mix.mock",
]
INT_KEYS = [
    "simulation.ticks", "simulation.burn_in", "simulation.decision_interval", "simulation.history",
    "fundamentals.news_interval", "exchange.order_ttl", "exchange.halt_window",
    "exchange.halt_ticks", "exchange.auction_interval", "exchange.position_limit",
    "population.n_traders", "population.n_market_makers", "population.initial_shares",
    "population.mm_initial_shares", "population.llm.memory", "population.llm.decision_cap",
    "population.llm.max_output_tokens",
]
NON_FINITE = st.sampled_from([".nan", ".NaN", ".inf", ".Inf", "-.inf", "+.inf"])
HUGE_INT = st.one_of(st.integers(min_value=2**63, max_value=10**40),
                     st.integers(min_value=-(10**40), max_value=-(2**63) - 1)).map(str)
WRONG_TYPE = st.sampled_from(["abc", "[1, 2]", "{a: 1}", "{a: .nan}", "!!binary aGk=",
                              "!!set {a: null}", "1e999x", "[.inf]"])


@dataclass(frozen=True)
class Case:
    """One malformed input: files to write (name -> text or bytes) in a scratch directory, the
    ``ma`` arguments (``{dir}`` is that directory), and what the error line must name."""

    files: tuple[tuple[str, str | bytes], ...]
    argv: tuple[str, ...]
    names_file: str  # a path relative to {dir}, or an absolute one
    names_key: str | None

    @property
    def sources(self) -> tuple[str, ...]:
        """What the line may name as the source: the file, or the ``--set`` at fault (a value
        that is not even valid YAML is the argument's fault, not the file's)."""
        return (self.names_file, *(f"--set '{a}" for a in self.argv if "=" in a))


def bad_value(key: str) -> st.SearchStrategy[str]:
    """YAML text that no config accepts at ``key``."""
    if key in INT_KEYS:
        return st.one_of(NON_FINITE, HUGE_INT, WRONG_TYPE, st.just("1.5"))
    return st.one_of(NON_FINITE, WRONG_TYPE, st.integers(min_value=10**309,
                                                         max_value=10**320).map(str))


def nested(key: str, value: str) -> str:
    """``a.b.c: value`` as block YAML."""
    parts = key.split(".")
    return "".join(f"{'  ' * i}{p}:\n" for i, p in enumerate(parts[:-1])) + (
        f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}\n")


def run_argv(config: str) -> tuple[str, ...]:
    return ("run", config, "--seed", "1", "--out", "{dir}/out", "--quiet")


def design_text(cell: str, top: str = "seeds: [1]\n") -> str:
    return (f"base: {BASELINE}\nprices: {PRICES}\n{top}cells:\n  - name: a\n{cell}")


@st.composite
def override_case(draw) -> Case:
    key = draw(st.sampled_from(FLOAT_KEYS + INT_KEYS))
    value = draw(bad_value(key))
    return Case((), (*run_argv(str(BASELINE)), "--set", f"{key}={value}"), str(BASELINE), key)


@st.composite
def config_file_case(draw) -> Case:
    key = draw(st.sampled_from(FLOAT_KEYS + INT_KEYS + ["treatment.x"]))
    value = draw(NON_FINITE if key == "treatment.x" else bad_value(key))
    return Case((("c.yaml", nested(key, value)),), run_argv("{dir}/c.yaml"), "c.yaml", key)


@st.composite
def design_case(draw) -> Case:
    key = draw(st.sampled_from(FLOAT_KEYS + INT_KEYS))
    value = draw(bad_value(key))
    where = draw(st.sampled_from(["cell", "design", "treatment"]))
    if where == "cell":
        text = design_text(f"    overrides:\n      {key}: {value}\n")
    elif where == "design":
        text = design_text("", f"seeds: [1]\noverrides:\n  {key}: {value}\n")
    else:
        key, text = "treatment.x", design_text(f"    treatment: {{x: {draw(NON_FINITE)}}}\n")
    command = draw(st.sampled_from([("budget", "{dir}/d.yaml"),
                                    ("design", "{dir}/d.yaml", "--mock", "--results",
                                     "{dir}/results", "--workers", "1", "--quiet")]))
    return Case((("d.yaml", text),), command, "d.yaml", key)


@st.composite
def seeds_case(draw) -> Case:
    lo = draw(st.integers(min_value=0, max_value=2**32))
    seeds = draw(st.one_of(
        st.integers(min_value=2**32, max_value=10**30).map(lambda hi: f"'{lo}-{hi}'"),
        st.integers(min_value=2**63, max_value=10**30).map(lambda s: f"[{s}]"),
        st.integers(min_value=10_001, max_value=10**6).map(lambda n: f"'0-{n - 1}'"),
        st.just("[-1]"), st.just("'5-1'"), st.just("[.nan]")))
    return Case((("d.yaml", design_text("", f"seeds: {seeds}\n")),), ("budget", "{dir}/d.yaml"),
                "d.yaml", "seeds")


@st.composite
def structure_case(draw) -> Case:
    """Whole-file problems: not text, a key written twice, aliases, recursion, a list."""
    kind = draw(st.sampled_from(["binary", "duplicate", "laughs", "recursive", "list"]))
    key: str | None = None
    if kind == "binary":
        body = draw(st.binary(min_size=1, max_size=64).filter(_not_utf8))
    elif kind == "duplicate":
        key = draw(st.sampled_from(FLOAT_KEYS + INT_KEYS))
        first, second = nested(key, "1"), nested(key, "2")
        leaf = second.splitlines()[-1]
        body = first + leaf + "\n"  # the leaf again, in the same mapping
    elif kind == "laughs":
        width = draw(st.integers(min_value=8, max_value=12))
        lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, 9)]
        body = "treatment:\n" + "".join(f"  {ln}\n" for ln in lines)
        key = "treatment.l"
    elif kind == "recursive":
        body, key = "treatment: &a {x: *a}\n", "treatment.x"
    else:
        body = "- simulation\n- exchange\n"
    name = draw(st.sampled_from(["c.yaml", "d.yaml"]))
    argv = run_argv("{dir}/c.yaml") if name == "c.yaml" else ("budget", "{dir}/d.yaml")
    return Case(((name, body),), argv, name, key)


@st.composite
def path_case(draw) -> Case:
    kind = draw(st.sampled_from(["config_dir", "config_missing", "base_dir", "base_missing",
                                 "out_under_file", "results_file", "prices_dir"]))
    blocker = ("blocker", "x")
    if kind == "config_dir":
        return Case((blocker,), run_argv("{dir}"), "{dir}", None)
    if kind == "config_missing":
        return Case((), run_argv("{dir}/nope.yaml"), "nope.yaml", None)
    if kind in ("base_dir", "base_missing"):
        base = "." if kind == "base_dir" else "nope.yaml"
        return Case((("d.yaml", f"base: {base}\nseeds: [1]\ncells:\n  - name: a\n"),),
                    ("budget", "{dir}/d.yaml"), base if kind == "base_missing" else "{dir}", None)
    if kind == "prices_dir":
        text = design_text("    overrides: {population.llm_share: 0.1, "
                           "population.llm.provider_mix: {openai: 1.0}, "
                           "population.llm.models: {openai: gpt-5.4-nano}, "
                           "population.llm.usd_cap: 1}\n").replace(f"prices: {PRICES}", "prices: .")
        return Case((("d.yaml", text),), ("budget", "{dir}/d.yaml"), "{dir}", None)
    if kind == "out_under_file":
        return Case((blocker,), (*run_argv(str(BASELINE))[:-3], "--out", "{dir}/blocker/run",
                                 "--quiet"), "blocker/run", None)
    return Case((blocker, ("d.yaml", design_text(""))),
                ("design", "{dir}/d.yaml", "--mock", "--results", "{dir}/blocker", "--workers",
                 "1", "--quiet"), "blocker", None)


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# Examples that failed on main at 3d92a05 (issue 11) or while this test was written.
CORPUS = [
    Case((), (*run_argv(str(BASELINE)), "--set", "fundamentals.v0=.inf"), str(BASELINE),
         "fundamentals.v0"),
    Case((), (*run_argv(str(BASELINE)), "--set", "population.initial_cash=.inf"), str(BASELINE),
         "population.initial_cash"),
    Case((), (*run_argv(str(BASELINE)), "--set",
              "shocks=[{time: 100, kind: fundamental_jump, size: .inf}]"), str(BASELINE),
         "shocks.0.size"),
    Case((), (*run_argv(str(BASELINE)), "--set",
              "shocks=[{time: 100, kind: fundamental_jump, size: .nan}]"), str(BASELINE),
         "shocks.0.size"),
    Case((), (*run_argv(str(BASELINE)), "--set", "population.initial_shares=100000000000000000000"),
         str(BASELINE), "population.initial_shares"),
    Case((), (*run_argv(str(BASELINE)), "--set", "population.llm.provider_mix={mock: .nan}"),
         str(BASELINE), "population.llm.provider_mix.mock"),
    Case((), (*run_argv(str(BASELINE)), "--set",
              "population.llm.provider_mix={mock: 1, openai: .nan}"), str(BASELINE),
         "population.llm.provider_mix.openai"),
    Case((), (*run_argv(str(BASELINE)), "--set", "fundamentals.sigma=.inf"), str(BASELINE),
         "fundamentals.sigma"),
    Case((), (*run_argv(str(BASELINE)), "--set", "treatment.x=.nan"), str(BASELINE),
         "treatment.x"),
    Case((), (*run_argv(str(BASELINE)), "--set", "simulation.ticks=1000000"), str(BASELINE),
         "simulation"),
    Case((), (*run_argv(str(BASELINE)), "--set", "population.n_traders=100000", "--set",
              "simulation.ticks=100000"), str(BASELINE), "simulation"),
    Case((), (*run_argv(str(BASELINE)), "--set",
              "population.llm.providers={mock: {latency_s: 1000000000}}"), str(BASELINE),
         "population.llm.providers.mock.latency_s"),
    Case((), (*run_argv(str(BASELINE)), "--set", "fundamentals.news_interval=" + "9" * 25),
         str(BASELINE), "fundamentals.news_interval"),
    Case((("c.yaml", b"\x89PNG\r\n\x1a\n\x00\x00"),), run_argv("{dir}/c.yaml"), "c.yaml", None),
    Case((("c.yaml", "exchange:\n  halt_threshold: 0.05\n  halt_threshold: 0.1\n"),),
         run_argv("{dir}/c.yaml"), "c.yaml", "exchange.halt_threshold"),
    Case((("d.yaml", design_text("", "seeds: '0-999999999999'\n")),), ("budget", "{dir}/d.yaml"),
         "d.yaml", "seeds"),
    Case((("d.yaml", design_text("    treatment: {x: .nan}\n")),), ("budget", "{dir}/d.yaml"),
         "d.yaml", "treatment.x"),
]


class _OverCpu(Exception):
    pass


@contextlib.contextmanager
def cpu_watchdog(seconds: float):
    """Raise :class:`_OverCpu` in the block once this process has used ``seconds`` of CPU."""
    def alarm(signum, frame):
        raise _OverCpu(f"still busy after {seconds} s of CPU")

    old = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def _tripwire(*args, **kwargs):
    raise AssertionError("a simulation started on malformed input")


def run_case(case: Case) -> tuple[int, str, Path]:
    """Write the case's files, run ``ma`` in-process, return (exit code, stderr, dir)."""
    tmp = Path(tempfile.mkdtemp(prefix="ma-bad-"))
    for name, body in case.files:
        (tmp / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    argv = [a.replace("{dir}", str(tmp)) for a in case.argv]
    err = io.StringIO()
    # Both names of the tick loop: the runner binds its own at import, and a runner first
    # imported inside the patch would keep the tripwire for every later test in the process.
    with (mock.patch("market_agents.sim.simulation.simulate", _tripwire),
          mock.patch("market_agents.sim.runner.simulate", _tripwire),
          contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()),
          cpu_watchdog(CPU_SECONDS)):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
    return code, err.getvalue(), tmp


def check_refused(case: Case, code: int, err: str, tmp: Path) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"ma {case.argv[0]}: error: "), line
    assert "Traceback" not in err
    names = [n.replace("{dir}", str(tmp)) for n in case.sources]
    assert any(n in line for n in names), (names, line)
    if case.names_key is not None:
        assert case.names_key in line, (case.names_key, line)
    assert not (tmp / "out").exists()
    assert not [p for p in tmp.rglob("manifest.json")]  # no run directory at all


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(override_case(), config_file_case(), design_case(), seeds_case(),
                 structure_case(), path_case()))
def test_malformed_input_is_refused_in_one_line_before_any_work(case):
    code, err, tmp = run_case(case)
    try:
        check_refused(case, code, err, tmp)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


for _case in CORPUS:
    test_malformed_input_is_refused_in_one_line_before_any_work = example(_case)(
        test_malformed_input_is_refused_in_one_line_before_any_work)


@pytest.mark.parametrize("case", [CORPUS[0], CORPUS[13], CORPUS[15]],
                         ids=["inf_override", "binary_file", "huge_seed_range"])
def test_the_real_entry_point_prints_one_line(case, tmp_path):
    """A real ``ma`` process: the console script's path, interpreter start-up included."""
    for name, body in case.files:
        (tmp_path / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    argv = [a.replace("{dir}", str(tmp_path)) for a in case.argv]
    proc = subprocess.run([sys.executable, "-m", "market_agents.cli", *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert case.names_file.replace("{dir}", str(tmp_path)) in proc.stderr


def test_a_bad_argument_is_one_line_too(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", str(BASELINE), "--seed", "one", "--out", "x"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == ("ma run: error: argument --seed: invalid int value: 'one' "
                           "(see ma run --help)")


@pytest.mark.parametrize("sets,keys", [
    (("exchange.tick_size=1000",), ("exchange.tick_size", "fundamentals.v0")),
    (("exchange.tick_size=1e308",), ("exchange.tick_size", "fundamentals.v0")),
    (("exchange.tick_size=1", "exchange.halt_threshold=0.002"),
     ("exchange.halt_threshold", "exchange.tick_size", "fundamentals.v0")),
], ids=["tick_1000", "tick_1e308", "breaker_one_tick"])
def test_a_degenerate_market_is_refused_in_one_line(sets, keys):
    """Issue 25: each value is valid alone, together they make no market (a tick of 1,000 on a
    price of 475 ran with exit 0, every trade at one tick and no bids)."""
    argv = [a for s in sets for a in ("--set", s)]
    case = Case((), (*run_argv(str(BASELINE)), *argv), str(BASELINE), keys[0])
    code, err, tmp = run_case(case)
    try:
        check_refused(case, code, err, tmp)
        assert all(k in err for k in keys), err
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_a_degenerate_market_is_refused_by_the_real_entry_point(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "market_agents.cli", "run", str(BASELINE),
                           "--seed", "1", "--out", str(out), "--quiet", "--set",
                           "exchange.tick_size=1000"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"ma run: error: {BASELINE}: exchange.tick_size 1000 against "
                                  "fundamentals.v0 475: ")
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()
