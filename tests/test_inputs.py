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
