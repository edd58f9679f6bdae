"""One helper reads the environment: every ARGUS_* variable is documented there and read nowhere else."""

import re
from pathlib import Path

import pytest

from argus_dagster.infra.environment import VARIABLES, SettingError, environment

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> list[Path]:
    return [p for d in ("argus_dagster", "assets", "resources") for p in (ROOT / d).rglob("*.py")]


def test_no_module_reads_the_environment_but_settings():
    offenders = []
    for path in _sources():
        if path.relative_to(ROOT).as_posix() == "argus_dagster/infra/environment.py":  # environment(): the one reader
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"os\.environ(?!\[\"DAGSTER_HOME\"\] =)|os\.getenv", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


def test_only_dagsters_public_api_is_used():
    """``dagster._core`` (and any other private module) changes without notice between releases."""
    offenders = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in _sources()
                 for n, line in enumerate(path.read_text().splitlines(), start=1)
                 if re.search(r"\bdagster\._", line)]
    assert not offenders, offenders


def test_a_profile_is_parsed_or_refused_by_name():
    from argus_dagster.infra.settings import parse_profile

    assert parse_profile("default").vlm_only is False
    p = parse_profile("judge=qwen2.5-vl-72b,vlm-only")
    assert (p.vlm_only, p.judge_model, p.rubric_model) == (True, "qwen2.5-vl-72b", "")
    assert parse_profile("rubric=big").rubric_model == "big"
    for bad in ("fast", "judge=", "default,vlm-only,x"):
        with pytest.raises(SettingError, match="not a profile part"):
            parse_profile(bad)


def test_every_variable_the_code_names_is_documented():
    named = set()
    for path in _sources():
        named |= set(re.findall(r"\"(ARGUS_[A-Z0-9_]+)\"", path.read_text())) - {"ARGUS_VLM", "ARGUS_RUBRIC"}  # prefixes
    named |= {f"{p}_{s}" for p in ("ARGUS_VLM", "ARGUS_RUBRIC")
              for s in ("BASE_URL", "MODEL", "API_KEY", "PATH", "DEVICE", "CONCURRENCY", "TIMEOUT_S", "MAX_RETRIES")}
    assert named - set(VARIABLES) == set()


def test_bad_numbers_name_the_variable(monkeypatch):
    monkeypatch.setenv("ARGUS_VLM_CONCURRENCY", "eight")
    with pytest.raises(SettingError, match=r"ARGUS_VLM_CONCURRENCY='eight': expected a whole number"):
        environment().number("ARGUS_VLM_CONCURRENCY", 8, minimum=1)
    monkeypatch.setenv("ARGUS_TOOL_THREADS", "0")
    with pytest.raises(SettingError, match="ARGUS_TOOL_THREADS=0: must be at least 1"):
        environment().number("ARGUS_TOOL_THREADS", 2, minimum=1)
    with pytest.raises(KeyError, match="not a documented setting"):
        environment().get("ARGUS_SOMETHING_ELSE")


def test_a_setting_that_is_not_utf8_is_refused_by_name_and_never_echoed(monkeypatch, capsys):
    """The bytes of a variable that are not UTF-8 reach Python as lone surrogates (os.environ's
    surrogateescape): refused where the setting is read, without its value (it may be a key), and
    shown printably by ``argus env``."""
    from argus_dagster.client.cli import main

    monkeypatch.setenv("ARGUS_PROFILE", "judge=q\udcff")  # the byte 0xff
    monkeypatch.setenv("ARGUS_VLM_API_KEY", "sk-\udcfesecret")
    with pytest.raises(SettingError, match=r"^ARGUS_PROFILE is not UTF-8 text \(character 8 is a lone surrogate, "
                                           r"U\+DCFF\); set it to UTF-8 text$"):
        environment().get("ARGUS_PROFILE")
    with pytest.raises(SettingError) as exc:
        environment().get("ARGUS_VLM_API_KEY")
    assert "secret" not in str(exc.value) and "character 4" in str(exc.value)
    assert environment().shown()["ARGUS_PROFILE"] == "judge=q\\xff"
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "judge=q\\xff" in out and "secret" not in out
    assert main(["leaderboard"]) != 0  # a command that reads the profile: refused in one line naming the variable
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("argus leaderboard: ARGUS_PROFILE is not UTF-8 text"), out


def test_secrets_and_credentials_are_masked_when_shown(monkeypatch):
    monkeypatch.setenv("ARGUS_VLM_BASE_URL", "http://user:secret@gpu-box:8000/v1")
    monkeypatch.setenv("ARGUS_VLM_API_KEY", "sk-secret")
    monkeypatch.setenv("ARGUS_VLM_MODEL", "qwen")
    shown = environment().shown()
    assert "secret" not in repr(shown) and shown["ARGUS_VLM_MODEL"] == "qwen"


def test_argus_env_lists_every_setting(monkeypatch, capsys):
    from argus_dagster.client.cli import main

    monkeypatch.setenv("ARGUS_VLM_API_KEY", "sk-secret")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in VARIABLES) and "sk-secret" not in out and "= ***" in out


def test_a_full_disk_is_one_line_wherever_it_surfaces(monkeypatch, capsys, tmp_path):
    import errno
    import sqlite3

    from argus_dagster.client import cli, read_commands

    def instance_full(_args):
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as exc:  # as SQLAlchemy wraps it
            raise RuntimeError("(sqlite3.OperationalError) database or disk is full [SQL: INSERT ...]") from exc

    def page_full(_args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "page.html"))

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    for fails, where in ((instance_full, "dagster_home"), (page_full, "page.html")):
        monkeypatch.setattr(read_commands, "cmd_leaderboard", fails)
        assert cli.main(["leaderboard"]) == 2
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and "no space left on the disk holding" in out and where in out, out
    monkeypatch.setattr(read_commands, "cmd_leaderboard", lambda _a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(["leaderboard"])


def test_the_code_location_serves_what_its_configuration_names_never_the_last_evaluated(tmp_path, monkeypatch):
    """Commands default to the evaluation scored last; the code location (UI, daemon, the runs they
    launch) to ARGUS_BENCH(_DIR)/ARGUS_PROFILE, else the demo, whatever ran since."""
    from argus_dagster.infra.settings import evaluation_settings, load_settings, record_evaluation, served_settings

    for k in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    for name in ("alpha", "beta"):
        (tmp_path / name / "T2V").mkdir(parents=True)
    record_evaluation(evaluation_settings(tmp_path / "alpha", tmp_path / "c", name="alpha", profile="vlm-only"))
    record_evaluation(evaluation_settings(tmp_path / "beta", tmp_path / "c", name="beta"))
    assert load_settings().evaluation == "beta/default"  # a command: the one evaluated last
    assert served_settings().evaluation == "demo/default"  # the code location: the one default
    from argus_dagster.location import defs

    assert defs().resources["bench"].bench_name() == "demo"
    assert served_settings().bench_dir == tmp_path / "home" / "bench"
    monkeypatch.setenv("ARGUS_BENCH", "alpha")
    assert served_settings().evaluation == "alpha/default"  # its default profile, not alpha's last one
    monkeypatch.setenv("ARGUS_PROFILE", "vlm-only")
    assert served_settings().evaluation == "alpha/vlm-only"
    assert served_settings("beta", "default").evaluation == "beta/default"  # make ui BENCH=beta PROFILE=default
    assert defs().resources["bench"].bench_name() == "alpha"  # what Dagster loads follows the same rule
    monkeypatch.setenv("ARGUS_BENCH_DIR", str(tmp_path / "beta"))
    monkeypatch.setenv("ARGUS_CANDIDATES_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ARGUS_BENCH")
    assert served_settings().evaluation == "beta/vlm-only"


def test_the_retry_back_off_doubles_with_each_run_in_a_row_up_to_its_cap():
    from argus_dagster.infra.environment import Backoff

    # 1 min after the first run that left work to retry, then 2, 4, 8, 16, 32, then the 1-hour cap.
    expected = {0: 0, 1: 60, 2: 120, 3: 240, 4: 480, 5: 960, 6: 1920, 7: 3600, 8: 3600, 500: 3600}
    assert {n: Backoff(60, 3600).delay_s(n) for n in expected} == expected
    assert [Backoff(0.5, 3).delay_s(n) for n in range(6)] == [0, 0.5, 1, 2, 3, 3]
    assert [Backoff(0, 3600).delay_s(n) for n in range(3)] == [0, 0, 0]  # 0: retried on every tick


def test_the_retry_back_off_is_read_from_its_settings(monkeypatch):
    from argus_dagster.infra.environment import retry_backoff

    monkeypatch.delenv("ARGUS_RETRY_BACKOFF_S", raising=False)
    monkeypatch.delenv("ARGUS_RETRY_BACKOFF_MAX_S", raising=False)
    assert (retry_backoff().base_s, retry_backoff().max_s) == (60, 3600)
    monkeypatch.setenv("ARGUS_RETRY_BACKOFF_S", "0.25")
    monkeypatch.setenv("ARGUS_RETRY_BACKOFF_MAX_S", "2")
    assert [retry_backoff().delay_s(n) for n in range(5)] == [0, 0.25, 0.5, 1, 2]
    monkeypatch.setenv("ARGUS_RETRY_BACKOFF_S", "-1")
    with pytest.raises(SettingError, match="ARGUS_RETRY_BACKOFF_S=-1.0: must be at least 0"):
        retry_backoff()
