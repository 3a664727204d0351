"""The administrator's ceiling (issue 42 §4): a policy file pins servers, models, the most permissive approval, a
budget and patterns always redacted; a ``%config`` beyond it is refused in one sentence naming the file, a turn
whose effective settings are beyond it sends nothing, and a file that cannot be applied lifts nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakeopenai import Reply

from shiro_kernel import policy, redact
from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.errors import PolicyError


@pytest.fixture(autouse=True)
def _no_system_policy(monkeypatch):
    monkeypatch.setattr(policy, "SYSTEM_PATHS", ())
    yield
    redact.set_floor(())


def _write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def ceiling(monkeypatch, tmp_path, fake_openai):
    """A policy allowing the fake server and gpt-4o-mini, at most 'ask', at most $1, CUST ids always redacted."""
    path = _write(
        tmp_path,
        f"servers: [{fake_openai.base_url.removesuffix('/v1')}]\nmodels: [gpt-4o-mini, 'qwen*']\napproval: ask\n"
        "budget_usd: 1\nredact: ['CUST-[0-9]{6}']\n",
    )
    monkeypatch.setenv("SHIRO_POLICY", str(path))
    return path


def test_a_config_beyond_the_policy_is_refused_in_one_sentence_naming_it(shiro_shell, ceiling, caplog):
    # %config logs a refused value as an error (a kernel's cell shows it as stderr); the value is not taken
    for line, rule in [
        ("%config Shiro.approval = 'auto'", "allows at most 'ask'"),
        ("%config Shiro.model = 'gpt-4o'", "allows only the models gpt-4o-mini, qwen*"),
        ("%config Shiro.budget_usd = 5.0", "sets a budget of at most $1.00"),
        ("%config Shiro.budget_usd = None", "sets a budget of at most $1.00"),
        ("%config Shiro.base_url = 'https://api.example.com/v1'", "allows only the servers"),
    ]:
        caplog.clear()
        shiro_shell.run_cell(line)
        assert [r.getMessage() for r in caplog.records if f"the policy at {ceiling} {rule}" in r.getMessage()], line
    config = next(c for c in shiro_shell.configurables if isinstance(c, Shiro))
    # each refused value rolled back to what the setting had, never to traitlets' static default ('', None)
    assert (config.approval, config.model, config.budget_usd) == ("ask", "gpt-4o-mini", 1.0)
    caplog.clear()
    shiro_shell.run_cell("%config Shiro.approval = 'read-only'")  # within: taken
    assert "refused" not in caplog.text and config.approval == "read-only"


def test_the_settings_hold_their_value_after_a_refusal_and_defaults_come_down_to_the_ceiling(ceiling):
    config = Shiro()
    assert config.approval == "ask" and config.budget_usd == 1.0
    for name, value in [("approval", "auto"), ("budget_usd", None), ("budget_usd", 2.0), ("base_url", None)]:
        with pytest.raises(Exception, match="is refused: the policy at"):
            setattr(config, name, value)
    assert config.approval == "ask" and config.budget_usd == 1.0
    config.budget_usd = 0.5
    config.model = "qwen2.5-coder"
    assert (config.budget_usd, config.model) == (0.5, "qwen2.5-coder")


def test_a_read_only_policy_makes_read_only_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, "approval: read-only\n")))
    config = Shiro()
    assert config.approval == "read-only"
    with pytest.raises(Exception, match="allows at most 'read-only'"):
        config.approval = "ask"


def _agent(monkeypatch, fake, tmp_path, **settings) -> Agent:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-policy")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.chdir(tmp_path)
    return Agent(None, Shiro(**settings))


def test_a_turn_beyond_the_policy_sends_nothing(monkeypatch, fake_openai, tmp_path, ceiling):
    fake_openai.enqueue(Reply(text="ok"))
    # an environment default never passes a validator: the turn checks what it would send with
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o")
    with pytest.raises(PolicyError, match=r"Shiro.model = 'gpt-4o' is refused: the policy at .* allows only"):
        _agent(monkeypatch, fake_openai, tmp_path).ask("hi")
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o-mini")
    agent = _agent(monkeypatch, fake_openai, tmp_path)
    with pytest.raises(PolicyError, match="Shiro.model = 'o3' is refused"):
        agent.ask(_line("hi", model="o3"))  # %shiro --model o3 hi
    assert fake_openai.requests == []
    assert agent.ask("hi").reason == "answered"  # within the ceiling: the turn runs
    assert len(fake_openai.requests) == 1


def _line(prompt: str, **options):
    from shiro_kernel.line import Line

    return Line(prompt=prompt, **options)


def test_settings_made_before_the_policy_appeared_are_checked_at_the_turn(monkeypatch, fake_openai, tmp_path):
    agent = _agent(monkeypatch, fake_openai, tmp_path, model="gpt-4o-mini", approval="auto")
    monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, "approval: ask\n")))
    with pytest.raises(PolicyError, match=r"Shiro.approval = 'auto' is refused: the policy at .*policy.yaml allows"):
        agent.ask("hi")
    assert fake_openai.requests == []


def test_the_policy_redacts_its_patterns_whatever_shiro_redact_says(monkeypatch, fake_openai, tmp_path, ceiling):
    agent = _agent(monkeypatch, fake_openai, tmp_path, model="gpt-4o-mini", redact=[])
    fake_openai.enqueue(Reply(text="ok"))
    agent.ask("what do we know about CUST-123456?")
    sent = json.dumps(fake_openai.requests[0].body)
    assert "CUST-123456" not in sent and "[redacted:pattern]" in sent
    assert agent.config.redact == []  # the user's own list is theirs; the floor is the policy's


@pytest.mark.parametrize(
    "text, says",
    [
        ("approval: sometimes\n", "approval: 'sometimes' is not one of read-only, ask, auto"),
        ("aproval: ask\n", "unknown key 'aproval'"),
        ("servers: api.openai.com\n", "servers: 'api.openai.com' is not an http(s) URL"),
        ("budget_usd: lots\n", "budget_usd: 'lots' is not an amount of dollars"),
        ("models: [1, 2]\n", "models: a list of strings is expected"),
        ("- ask\n", "a mapping of settings is expected, not list"),
        ("approval: [ask\n", "not YAML"),
        ("redact: ['(']\n", "redact: '(' is not a regular expression"),
    ],
)
def test_a_policy_that_cannot_be_applied_lifts_nothing(monkeypatch, fake_openai, tmp_path, text, says):
    path = _write(tmp_path, text)
    monkeypatch.setenv("SHIRO_POLICY", str(path))
    agent = _agent(monkeypatch, fake_openai, tmp_path, model="gpt-4o-mini")
    with pytest.raises(PolicyError, match="no request is sent") as caught:
        agent.ask("hi")
    assert str(path) in str(caught.value) and says in str(caught.value)
    assert fake_openai.requests == []


def test_a_policy_named_but_missing_or_unreadable_sends_nothing(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("SHIRO_POLICY", str(tmp_path / "nowhere.yaml"))
    agent = _agent(monkeypatch, fake_openai, tmp_path, model="gpt-4o-mini")
    with pytest.raises(PolicyError, match="nowhere.yaml, does not exist; no request is sent"):
        agent.ask("hi")
    folder = tmp_path / "a-folder.yaml"
    folder.mkdir()
    monkeypatch.setenv("SHIRO_POLICY", str(folder))
    with pytest.raises(PolicyError, match="a-folder.yaml cannot be read"):
        agent.ask("hi")
    assert fake_openai.requests == []


def test_a_policy_value_this_version_does_not_know_sends_nothing(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, "values: none\n")))
    with pytest.raises(PolicyError, match="values"):
        _agent(monkeypatch, fake_openai, tmp_path, model="gpt-4o-mini").ask("hi")
    assert fake_openai.requests == []


def test_a_users_policy_adds_limits_but_never_lifts_the_systems(monkeypatch, tmp_path):
    system = _write(tmp_path, "approval: read-only\nmodels: [gpt-5-mini]\n", "system.yaml")
    monkeypatch.setattr(policy, "SYSTEM_PATHS", (system,))
    mine = _write(tmp_path, "approval: auto\nmodels: ['*']\nbudget_usd: 3\n", "mine.yaml")
    monkeypatch.setenv("SHIRO_POLICY", str(mine))
    assert [p.path for p in policy.policies()] == [system, mine]
    assert policy.refusal("approval", "ask") == (
        f"Shiro.approval = 'ask' is refused: the policy at {system} allows at most 'read-only'."
    )
    assert policy.refusal("model", "gpt-4o") is not None and policy.refusal("model", "gpt-5-mini") is None
    assert policy.budget_default() == 3.0  # the user's own file may add a limit the system's does not set


def test_a_server_is_matched_by_scheme_host_port_and_path_prefix(tmp_path):
    p = policy.parse("servers: ['http://127.0.0.1:8080/', 'https://API.openai.com/v1']\n", tmp_path / "p.yaml")
    assert p.allows_server("http://127.0.0.1:8080/v1") and p.allows_server("https://api.openai.com/v1/")
    assert p.allows_server(None)  # the default server is api.openai.com/v1
    assert not p.allows_server("http://127.0.0.1:8081/v1")
    assert not p.allows_server("http://127.0.0.1:8080.evil.example/v1")
    assert not p.allows_server("https://api.openai.com/v10")


def test_a_changed_policy_file_is_read_again(monkeypatch, tmp_path):
    path = _write(tmp_path, "approval: auto\n")
    monkeypatch.setenv("SHIRO_POLICY", str(path))
    assert policy.refusal("approval", "auto") is None
    path.write_text("approval: read-only\n")
    os.utime(path, ns=(1, 1))  # another mtime, whatever the clock's resolution
    assert policy.refusal("approval", "auto") is not None


def test_slash_policy_says_what_applies(shiro_shell, ceiling, capsys):
    shiro_shell.run_cell("%shiro /policy")
    out = capsys.readouterr().out
    assert str(ceiling) in out and "approval: at most 'ask'" in out and "budget: at most $1.00" in out
    assert "(you can write this file: it is no ceiling)" in out  # a file in the user's own folder
    os.environ.pop("SHIRO_POLICY")
    shiro_shell.run_cell("%shiro /policy")
    assert "no policy" in capsys.readouterr().out


def test_no_policy_costs_no_yaml_import_and_limits_nothing(monkeypatch):
    import subprocess
    import sys

    code = (
        "import sys; from shiro_kernel import policy; policy.SYSTEM_PATHS = ();"
        "assert policy.check({'model': 'x', 'approval': 'auto', 'budget_usd': None, 'base_url': None}) == ();"
        "print('yaml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_refused_value_in_ipython_config_is_said_and_load_ext_still_works(monkeypatch, tmp_path, capsys):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, "approval: ask\n")))
    monkeypatch.setenv("SHIRO_NO_WARMUP", "1")
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.Shiro.approval = "auto"
    config.Shiro.max_steps = 7
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance(config=config)
    try:
        assert shell.run_cell("%load_ext shiro_kernel").success
        settings = next(c for c in shell.configurables if isinstance(c, Shiro))
        assert (settings.approval, settings.max_steps) == ("ask", 7)  # the refused value only
        err = capsys.readouterr().err
        assert "Shiro.approval = 'auto' is refused: the policy at" in err and "is not taken" in err
    finally:
        shell.run_cell("%unload_ext shiro_kernel")
        InteractiveShell.clear_instance()


def test_security_no_route_past_the_policy_sends_a_request(monkeypatch, fake_openai, tmp_path):
    from faultlog import SECURITY, record

    def attempt(text: str | None, **env: str) -> None:
        for name, value in {"SHIRO_MODEL": "gpt-4o-mini", **env}.items():
            monkeypatch.setenv(name, value)
        if text is not None:
            monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, text)))
        with pytest.raises(PolicyError):
            _agent(monkeypatch, fake_openai, tmp_path).ask("hi")

    routes = [
        ("models: [gpt-4o-mini]\n", {"SHIRO_MODEL": "gpt-4o"}),  # an environment default
        ("servers: ['http://127.0.0.1:9']\n", {}),  # $OPENAI_BASE_URL (the fake's) is another server
        ("budget_usd: 1\nmodels: ['*']\n", {}),  # then the budget lifted before the policy: below
        ("private: ['a.b.c']\n", {}),  # a name that is none
        ("values: none\n", {}),  # a mode this version does not know
        ("aproval: ask\n", {}),  # a typo lifts nothing
        ("approval: [ask\n", {}),
        (None, {"SHIRO_POLICY": str(tmp_path / "missing.yaml")}),
    ]
    tried = 0
    for text, env in routes:
        if text == "budget_usd: 1\nmodels: ['*']\n":
            agent = _agent(monkeypatch, fake_openai, tmp_path, budget_usd=None)  # no policy yet: taken
            monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, text)))
            with pytest.raises(PolicyError, match="no budget is refused"):
                agent.ask("hi")
        else:
            attempt(text, **env)
        tried += 1
    agent = _agent(monkeypatch, fake_openai, tmp_path)
    monkeypatch.setenv("SHIRO_POLICY", str(_write(tmp_path, "models: [gpt-4o-mini]\n")))
    with pytest.raises(PolicyError):
        agent.ask(_line("hi", model="o3"))  # %shiro --model o3
    tried += 1
    assert fake_openai.requests == []
    record(
        f"{SECURITY}an administrator's policy: a model or server from the environment, %shiro --model, a budget "
        "lifted before the file, a private name that is none, a values mode it does not know, a typo, bad YAML, a named file missing",
        tried,
        len(fake_openai.requests),
        f"{tried} turns refused in one sentence naming the policy; 0 requests reached the server",
    )
