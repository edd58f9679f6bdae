"""`argus open` is read-only: with no home, or no results yet, it says so and creates nothing."""

import os

from argus_dagster.client.cli import main


def test_open_without_a_home_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ARGUS_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["open", "--port", "0"]) == 1
    assert "no ARGUS_HOME" in capsys.readouterr().out and os.listdir(tmp_path) == []


def test_open_before_results_says_what_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert main(["open", "--port", "0"]) == 1
    assert "run `argus demo` or `argus evaluate` first" in capsys.readouterr().out
    assert os.listdir(tmp_path / "home") == []


def test_open_names_a_bad_port_setting(tmp_path, monkeypatch, capsys):
    reports = tmp_path / "benches" / "demo" / "default" / "reports"  # the demo evaluation's
    reports.mkdir(parents=True)
    (reports / "index.html").write_text("<p>x</p>")
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    monkeypatch.setenv("ARGUS_REPORTS_PORT", "eighty")
    assert main(["open"]) == 2
    assert "ARGUS_REPORTS_PORT='eighty'" in capsys.readouterr().out
