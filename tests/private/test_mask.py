"""The stand-ins and the matcher (shiro_kernel.private.mask), the names (names.py) and the values read from a
namespace (values.py), without a kernel."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from shiro_kernel.private.mask import STAND_IN, Mask, StreamUnmask
from shiro_kernel.private.names import Name, Private, check, read_project
from shiro_kernel.private.values import collect


def test_every_form_of_a_value_is_its_one_stand_in_and_only_where_it_stands_whole() -> None:
    mask = Mask("key")
    mask.add({"alice@example.com": "email", "O'Brien": "name", "Ann": "name", "52000": "salary", "Zoë Ünal": "name"})
    text = (
        "alice@example.com | Annual Ann | O'Brien | 'O\\'Brien' | 52000 vs 152000 and 52000.5 | "
        + json.dumps({"who": ["Zoë Ünal", "O'Brien"]})
        + " | O&#x27;Brien"
    )
    out, count = mask.mask(text)
    for value in ("alice@example.com", "O'Brien", "O\\'Brien", "Zo\\u00eb", "Zoë", "O&#x27;Brien"):
        assert value not in out, value
    assert "Annual" in out and "152000" in out and "52000.5" in out  # not inside a longer word or number
    assert count == 8 and len(set(STAND_IN.findall(out))) == 5
    assert out.count(mask.token("O'Brien")) == 4
    assert mask.mask(text)[0] == out  # the same value, the same stand-in
    assert Mask("key").add({"O'Brien": "name"}) == 1 and Mask("other").token("O'Brien") is None
    assert mask.unmask(out).startswith("alice@example.com | Annual Ann | O'Brien")


def test_overlapping_values_the_longest_that_stands_whole_is_masked() -> None:
    mask = Mask("key")
    mask.add({"Ann": "name", "Ann Lee": "name", "Ann L": "name", "Lee": "name", "Lee Ann": "name"})
    out, count = mask.mask("Ann Lee | Ann Leeds | Annual Lee | Lee Ann Lee")
    # "Ann Lee" whole over "Ann"; in "Ann Leeds" the longer "Ann L" is not whole, so "Ann" is; then "Lee" alone;
    # "Lee Ann" (leftmost) before the "Ann Lee" that overlaps it, and the last "Lee" on its own
    tokens = [mask.token(v) for v in ("Ann Lee", "Ann", "Lee", "Lee Ann", "Lee")]
    assert out == f"{tokens[0]} | {tokens[1]} Leeds | Annual {tokens[2]} | {tokens[3]} {tokens[4]}"
    assert count == 5 and mask.unmask(out) == "Ann Lee | Ann Leeds | Annual Lee | Lee Ann Lee"


def test_a_stand_in_is_keyed_by_the_session_and_stable_for_it() -> None:
    one, again, other = Mask("k1"), Mask("k1"), Mask("k2")
    for m in (one, again, other):
        m.add({"alice@example.com": "email"})
    assert one.token("alice@example.com") == again.token("alice@example.com")
    assert one.token("alice@example.com") != other.token("alice@example.com")
    assert STAND_IN.fullmatch(one.token("alice@example.com") or "")


def test_a_stand_in_in_code_runs_as_the_real_value_escaped_for_its_quotes() -> None:
    mask = Mask("key")
    mask.add({'O\'Brien "Jr"': "name", "alice@example.com": "email"})
    name, email = mask.token('O\'Brien "Jr"'), mask.token("alice@example.com")
    code = f"a = '{name}'\nb = \"{name}\"\nc = {email!r}\nprint(f'{{a}} {email}')"
    ns: dict = {}
    exec(mask.unmask_code(code), ns)
    assert ns["a"] == ns["b"] == 'O\'Brien "Jr"' and ns["c"] == "alice@example.com"
    args = json.dumps({"code": f"df[df.email == '{email}']"})
    assert json.loads(mask.unmask_arguments(args)) == {"code": "df[df.email == 'alice@example.com']"}
    assert mask.unmask("[private:email:00000000]") == "[private:email:00000000]"  # unknown: left as it is


def test_a_value_from_the_data_never_becomes_code_wherever_the_stand_in_is_written() -> None:
    """A cell holding code (``{__import__('os')…}``, a quote that would close the literal) arrives as data: in an
    f-string its braces are doubled, in a plain literal its quotes escaped, outside a string it is a literal."""
    evil = "{__import__('os').getpid()}\" + 'x'"
    mask = Mask("key")
    mask.add({evil: "name", "52000": "salary", "ab\\cd": "path"})
    name, salary, path = mask.token(evil), mask.token("52000"), mask.token("ab\\cd")
    code = "\n".join(
        [
            f'a = f"hello {name}"',
            f"b = 'x {name} y'",
            f'c = """{name}"""',
            f"d = {name}",
            f"e = {salary} + 1",
            f"f = r'{name}'",
            f"g = r'{path}'",
        ]
    )
    ns: dict = {}
    exec(mask.unmask_code(code), ns)
    assert ns["a"] == f"hello {evil}" and ns["b"] == f"x {evil} y" and ns["c"] == evil and ns["d"] == evil
    assert ns["e"] == 52001
    assert ns["f"] == name and ns["g"] == path  # a raw literal the value cannot be written in: the stand-in stays
    assert mask.unmask_code(f"print({name}") == f"print({name}"  # code that does not tokenize: nothing substituted
    args = json.loads(
        mask.unmask_arguments(json.dumps({"command": f"grep {name} {salary} x.csv", "q": f"who is {name}?"}))
    )
    assert args == {"command": f"grep {name} 52000 x.csv", "q": f"who is {evil}?"}  # a shell word only when plain


def test_a_stand_in_written_back_without_its_brackets_still_means_the_value() -> None:
    """Qwen2.5-Coder-1.5B on llama-server, asked for one customer's total, wrote
    ``df[df['email'] == 'private:email:7c5655c5']`` (brackets dropped) and summed nothing."""
    mask = Mask("key")
    mask.add({"ana.lima@example.com": "email"})
    bare = (mask.token("ana.lima@example.com") or "")[1:-1]
    ns: dict = {}
    exec(mask.unmask_code(f"x = '{bare}'\ny = {bare}"), ns)
    assert ns["x"] == ns["y"] == "ana.lima@example.com"
    assert mask.unmask(f"it is {bare}.") == "it is ana.lima@example.com."
    assert mask.unmask("see private:email:00000000 and notprivate:email:" + bare[14:]) == (
        "see private:email:00000000 and notprivate:email:" + bare[14:]
    )  # unknown, or inside a longer word: as it is
    stream = StreamUnmask(mask)
    text = f"the total of {bare} is 10; a plain p and pr"
    assert "".join(stream.feed(text[i : i + 2]) for i in range(0, len(text), 2)) + stream.flush() == (
        "the total of ana.lima@example.com is 10; a plain p and pr"
    )


def test_a_stand_in_split_across_stream_deltas_is_shown_whole() -> None:
    mask = Mask("key")
    mask.add({"alice@example.com": "email"})
    token = mask.token("alice@example.com") or ""
    text = f"The top spender is {token}, then [a list] and [private: nothing]."
    for size in (1, 3, 7, 50):
        stream = StreamUnmask(mask)
        shown = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size)) + stream.flush()
        assert shown == "The top spender is alice@example.com, then [a list] and [private: nothing].", size


def test_names_from_every_source_and_the_session_changes() -> None:
    assert Name.parse("patients.ssn") == Name("patients.ssn", "patients", "ssn")
    assert Name.parse("email").whole("email") and Name.parse("email").column_of("any", "email")
    assert not Name.parse("patients.ssn").column_of("staff", "ssn")
    with pytest.raises(ValueError, match="not a private name"):
        check("a.b.c")
    private = Private()
    private.add("phone")
    private.remove("email")
    assert private.sources(["email", "salaries"], ["notes"], ["ssn"]) == {
        "ssn": "policy",
        "notes": "project",
        "salaries": "setting",
        "phone": "session",
    }
    with pytest.raises(ValueError, match="administrator's policy"):
        private.remove("ssn", ["ssn"])


def test_the_project_file_adds_names_and_says_what_it_skipped(tmp_path) -> None:
    (tmp_path / ".shiro").mkdir()
    (tmp_path / ".shiro" / "private").write_text("# shared by the team\nemail\npatients.ssn  # ids\na.b.c\n\n")
    names, problems = read_project(tmp_path)
    assert names == ("email", "patients.ssn") and len(problems) == 1 and "line 4" in problems[0]
    assert read_project(tmp_path / "none") == ((), [])


def test_values_of_private_columns_series_and_whole_variables() -> None:
    df = pd.DataFrame({"email": ["a@x.io", "b@x.io", None], "spend": [10.5, 20.0, 3.0], "ssn": ["111-22", "333", "x"]})
    ns = {
        "df": df,
        "emails": df.email,
        "salaries": [52000, 61000.0],
        "other": pd.DataFrame({"ssn": ["999-99"]}),
        "_hidden": pd.DataFrame({"email": ["h@x.io"]}),
        "pd": pd,
    }
    found = collect(ns, [Name.parse("email"), Name.parse("df.ssn"), Name.parse("salaries")])
    assert set(found.texts) == {"a@x.io", "b@x.io", "111-22", "333", "52000", "61000.0", "61000"}
    assert found.texts["a@x.io"] == "email" and found.texts["111-22"] == "ssn" and found.short == 1  # "x"
    assert "10.5" not in found.texts and "999-99" not in found.texts  # another column, another variable's ssn
    assert found.sources == ["df.email", "df.ssn", "emails", "salaries"]
