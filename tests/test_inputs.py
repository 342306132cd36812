"""Reading user input (inputs.py): UTF-8 text files and strict YAML, refused in one line that
names the file and the key."""

import pytest

from market_agents.errors import ConfigError
from market_agents.inputs import MAX_FILE_BYTES, MAX_YAML_NODES, parse_yaml, read_text, read_yaml


def test_json_shaped_yaml_reads_as_before():
    assert parse_yaml("a: {b: [1, 2.5, x, true, null]}\n", "f.yaml") == {
        "a": {"b": [1, 2.5, "x", True, None]}}
    assert parse_yaml("", "f.yaml") is None


def test_a_date_stays_text():
    assert parse_yaml("asof: 2024-01-01\n", "f.yaml") == {"asof": "2024-01-01"}


@pytest.mark.parametrize("text", [
    "simulation:\n  ticks: 600\n  ticks: 700\n",
    "simulation: {ticks: 600}\nsimulation: {ticks: 700}\n",
    "cells:\n  - {name: a, seeds: [1], seeds: [2]}\n",
])
def test_a_key_written_twice_is_refused_with_its_path_and_lines(text):
    with pytest.raises(ConfigError, match=r"^f\.yaml: \S+: key written twice \(lines \d+ and "
                                          r"\d+\)"):
        parse_yaml(text, "f.yaml")


def test_the_duplicate_names_the_nested_key():
    with pytest.raises(ConfigError, match=r"f\.yaml: cells\.0\.seeds: key written twice"):
        parse_yaml("cells:\n  - {name: a, seeds: [1], seeds: [2]}\n", "f.yaml")


def test_a_merge_key_may_still_be_overridden():
    data = parse_yaml("base: &b {ticks: 600, burn_in: 50}\nsim:\n  <<: *b\n  ticks: 700\n",
                      "f.yaml")
    assert data["sim"] == {"ticks": 700, "burn_in": 50}


def test_aliases_within_the_limit_are_fine():
    data = parse_yaml("a: &a [1, 2]\nb: *a\nc: *a\n", "f.yaml")
    assert data == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def test_billion_laughs_is_refused_before_expansion():
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    with pytest.raises(ConfigError, match=rf"f\.yaml: l\d: expands to more than "
                                          rf"{MAX_YAML_NODES:,} values"):
        parse_yaml("\n".join(lines) + "\n", "f.yaml")


def test_a_recursive_alias_is_refused():
    with pytest.raises(ConfigError, match=r"f\.yaml: a\.0: an alias refers to a node that "
                                          "contains it"):
        parse_yaml("a: &a [*a]\n", "f.yaml")


def test_deep_nesting_is_refused():
    with pytest.raises(ConfigError, match=r"f\.yaml: .*nested"):
        parse_yaml("a: " + "[" * 200 + "]" * 200 + "\n", "f.yaml")
    with pytest.raises(ConfigError, match=r"f\.yaml: malformed YAML: nested too deeply"):
        parse_yaml("[" * 100_000, "f.yaml")


@pytest.mark.parametrize(("text", "tag"), [
    ("x: !!binary aGVsbG8=\n", "binary"),
    ("x: !!set {a: null}\n", "set"),
    ("x: !!timestamp 2024-01-01\n", "timestamp"),
    ("x: !!omap [{a: 1}]\n", "omap"),
])
def test_non_json_tags_are_refused(text, tag):
    with pytest.raises(ConfigError, match=rf"f\.yaml: x: line 1: YAML tag !!{tag} is not "
                                          "allowed"):
        parse_yaml(text, "f.yaml")


def test_python_tags_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^f\.yaml: malformed YAML at line 1, column 4: "
                                          r"could not determine a constructor[^\n]*$"):
        parse_yaml("x: !!python/object:os.system {}\n", "f.yaml")


@pytest.mark.parametrize(("text", "message"), [
    ("a: [1\n", r"malformed YAML at line 2, column 1: "),
    ("a:\n\tb: 1\n", r"malformed YAML at line 2, column 1: found character '\\t'"),
    ("a: \x00\n", r"malformed YAML: unacceptable character #x0000"),
])
def test_syntax_errors_are_one_line_with_the_place(text, message):
    with pytest.raises(ConfigError, match=r"^f\.yaml: " + message) as info:
        parse_yaml(text, "f.yaml")
    assert "\n" not in str(info.value)


def test_a_binary_file_is_not_text(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_bytes(b"simulation:\n  ticks: \xff\xfe600\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: file is not UTF-8 text \(byte 0xff at "
                                          r"offset 21\)"):
        read_yaml(f)
    f.write_bytes("a: 1\n".encode("utf-16"))
    with pytest.raises(ConfigError, match=r"c\.yaml: file is not UTF-8 text"):
        read_yaml(f)


def test_paths_must_be_readable_files_of_a_sane_size(tmp_path):
    with pytest.raises(ConfigError, match=r": is a directory, not a price table"):
        read_text(tmp_path, "price table")
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read file \(No such file"):
        read_text(tmp_path / "nope.yaml")
    big = tmp_path / "big.yaml"
    big.write_text("#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match=r"big\.yaml: 1,048,577 bytes; a file may hold at most"):
        read_text(big)


def test_the_top_level_must_be_a_mapping(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("- 1\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: top level must be a mapping, got list"):
        read_yaml(f)
    f.write_text("")
    assert read_yaml(f) == {}


def test_int_in_is_an_argparse_type_with_bounds():
    import argparse

    from market_agents.inputs import int_in

    seeds = int_in(1, 10_000)
    assert seeds("20") == 20
    for text, message in [("0", r"0 is not in 1\.\.10,000"), ("1e9", r"'1e9' is not a whole"),
                          ("100000000000", r"is not in 1\.\.10,000")]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            seeds(text)


# --- environment switches and base URLs (issue 33) ----------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from market_agents import provider_kinds  # noqa: E402
from market_agents.inputs import (  # noqa: E402
    FLAG_ENVS,
    NEW_CACHE_ENV,
    REPLAY_ENV,
    check_base_url,
    check_environment,
    env_flag,
    parse_flag,
)

# The documented values (docs/inputs.md), written out here rather than read from the module:
# the test is that the module keeps to them.
ON = {"1", "true", "yes"}
OFF = {"", "0", "false", "no"}


def _cased(word: str) -> st.SearchStrategy[str]:
    """``word`` in any mix of upper and lower case, with blanks around it."""
    return st.tuples(st.lists(st.booleans(), min_size=len(word), max_size=len(word)),
                     st.sampled_from(["", " ", "\t", "  "]),
                     st.sampled_from(["", " ", "\n", " \t"])).map(
        lambda t: t[1] + "".join(c.upper() if up else c for c, up in zip(word, t[0],
                                                                          strict=True)) + t[2])


@given(st.sampled_from(sorted(ON | OFF)).flatmap(lambda w: st.tuples(st.just(w), _cased(w))))
def test_a_documented_switch_value_parses_in_any_case(pair):
    word, raw = pair
    assert parse_flag(raw, "X") is (word in ON)


@given(st.text().filter(lambda s: s.strip().lower() not in ON | OFF))
def test_any_other_switch_value_is_refused_naming_the_variable_and_the_values(raw):
    with pytest.raises(ConfigError) as info:
        parse_flag(raw, REPLAY_ENV)
    message = str(info.value)
    assert message.startswith(f"{REPLAY_ENV}=")
    assert "\n" not in message
    assert all(v in message for v in ("1/true/yes", "0/false/no"))


@pytest.mark.parametrize("name", [REPLAY_ENV, NEW_CACHE_ENV])
@pytest.mark.parametrize("raw", ["maybe", "on", "2", "y", "ja", "true!", "1 1"])
def test_the_serving_switches_refuse_what_they_do_not_understand(name, raw):
    # e83eada read every one of these as "off": MARKET_AGENTS_REPLAY=maybe paid live calls
    with pytest.raises(ConfigError, match=rf"^{name}='"):
        env_flag(name, {name: raw})
    with pytest.raises(ConfigError, match=rf"^{name}='"):
        check_environment({name: raw})


def test_every_boolean_switch_is_checked_when_ma_starts():
    assert set(FLAG_ENVS) == {REPLAY_ENV, NEW_CACHE_ENV}
    assert env_flag(REPLAY_ENV, {}) is False
    assert env_flag(REPLAY_ENV, {REPLAY_ENV: "YES"}) is True
    check_environment({REPLAY_ENV: "1", NEW_CACHE_ENV: "no"})


HOSTS = st.one_of(st.sampled_from(["127.0.0.1", "localhost", "[::1]", "api.openai.com"]),
                  st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,6}){0,2}", fullmatch=True))
GOOD_URLS = st.builds(
    lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
    st.sampled_from(["http", "https", "HTTP", "Https"]), HOSTS,
    st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")),
    st.sampled_from(["", "/", "/v1", "/openai/v1/"]))


@given(GOOD_URLS)
def test_an_http_url_with_a_host_is_a_base_url(url):
    assert provider_kinds.url_problem(url) is None
    assert check_base_url(url, "OPENAI_BASE_URL") == url


@given(st.one_of(
    # text that does not start with http:// or https:// (a scheme of its own, or none)
    st.text().filter(lambda s: not s.lower().startswith(("http://", "https://"))),
    st.builds(lambda s, rest: f"{s}://{rest}",
              st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True)
              .filter(lambda s: s not in ("http", "https")), st.text()),
    # an http(s) URL with a blank or a control character anywhere after the scheme
    st.builds(lambda s, head, bad, tail: f"{s}://x{head}{bad}{tail}",
              st.sampled_from(["http", "https"]), st.text(),
              st.sampled_from([" ", "\t", "\n", "\r", "\x00", "\x7f", "\u2028"]), st.text()),
    st.sampled_from(["http://", "https://", "http:///v1", "http://:8000/v1", "http://x:0/",
                     "http://x:99999/", "http://x:port/", "http://[::1/v1", "not a url",
                     "ftp://x", "127.0.0.1:8000/v1", "//127.0.0.1/v1", "file:///etc/hosts"])))
def test_anything_else_is_refused_naming_the_variable(url):
    assert provider_kinds.url_problem(url)
    with pytest.raises(ConfigError) as info:
        check_base_url(url, "OPENAI_BASE_URL")
    assert str(info.value).startswith("OPENAI_BASE_URL=")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"])
@pytest.mark.parametrize("url", ["not a url", "ftp://x", "x", "http://", " http://x/v1"])
def test_the_base_url_variables_are_checked_when_ma_starts(name, url):
    with pytest.raises(ConfigError, match=rf"^{name}="):
        check_environment({name: url})


def test_an_empty_base_url_variable_is_unset():
    check_environment({"OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""})


def test_a_url_that_may_carry_a_key_is_never_quoted():
    with pytest.raises(ConfigError) as info:
        check_base_url("ftp://user:sk-SECRET-9@host/v1", "OPENAI_BASE_URL")
    assert "SECRET" not in str(info.value)
