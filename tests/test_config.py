"""Settings precedence and validation; the CLI's secure default."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from proxy.cli import main
from proxy.config import Settings, SettingsError


def test_precedence_defaults_env_file_flags(tmp_path: Path) -> None:
    config = tmp_path / "hermes.toml"
    config.write_text('budget = 3000\nmodel = "from-file"\napi-key = ["k1:acme", "k2"]\n')
    env = {"HERMES_BUDGET": "2000", "HERMES_MODEL": "from-env", "HERMES_PORT": "9000"}

    assert Settings.load(environ={}).budget == 4000
    assert Settings.load(environ=env).budget == 2000
    from_file = Settings.load(environ=env, config_file=config)
    assert (from_file.budget, from_file.model, from_file.port) == (3000, "from-file", 9000)
    assert from_file.tenants == {"k1": "acme", "k2": "k2"}
    flagged = Settings.load(environ=env, config_file=config, flags={"budget": 5000})
    assert flagged.budget == 5000


def test_openai_variables_are_the_upstream_fallback() -> None:
    env = {"OPENAI_BASE_URL": "http://local:1234/v1", "OPENAI_API_KEY": "sk-x"}
    settings = Settings.load(environ=env)
    assert (settings.upstream, settings.upstream_api_key) == ("http://local:1234/v1", "sk-x")
    env["HERMES_UPSTREAM"] = "http://other/v1"
    assert Settings.load(environ=env).upstream == "http://other/v1"


def test_db_defaults_under_hermes_home(tmp_path: Path) -> None:
    assert Settings.load(environ={"HERMES_HOME": str(tmp_path)}).db == str(tmp_path / "state.db")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HERMES_BUDGET": "lots"}, "HERMES_BUDGET"),
        ({"HERMES_BUDGET": "100"}, "at least 256"),
        ({"HERMES_SUMMARIZER": "magic"}, "HERMES_SUMMARIZER"),
        ({"HERMES_UPSTREAM": "ftp://x"}, "http"),
        ({"HERMES_MEMORY_SHARE": "0.9"}, "below 0.9"),
    ],
)
def test_bad_values_name_the_culprit(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.load(environ=env)


def test_unknown_config_key_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("budgett = 1\n")
    with pytest.raises(SettingsError, match="budgett"):
        Settings.load(environ={}, config_file=config)


def test_serve_refuses_a_public_host_without_keys() -> None:
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to listen on 0.0.0.0 without client API keys" in result.output


def test_every_setting_has_a_flag_and_an_env_twin() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for flag in ("--budget", "--upstream", "--upstream-api-key", "--db", "--summarizer",
                 "--model", "--api-key", "--insecure-no-auth", "--host", "--port"):  # fmt: skip
        assert flag in result.output
    assert "HERMES_BUDGET" in result.output
