"""The shipped alerting rules: valid for Prometheus, and firing on the series they are meant for."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.system_packages import require
from tests.support.timing import seconds

GRAFANA = Path(__file__).resolve().parents[2] / "grafana"
ALERTS = GRAFANA / "alerts.yml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yml")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require("promtool", "prometheus"), *args],
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )


def test_the_rules_and_the_shipped_config_pass_promtool() -> None:
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = promtool("check", "config", str(GRAFANA / "prometheus.yml"))
    assert config.returncode == 0, config.stdout + config.stderr  # it loads alerts.yml too


def test_each_rule_fires_on_its_series_and_not_on_healthy_ones(tmp_path: Path) -> None:
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(UNIT_TESTS.read_text().replace("ALERTS_FILE", str(ALERTS)))
    result = promtool("test", "rules", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr
