"""Progress lines: in place with rate and time left on a terminal, periodic plain lines in a log,
nothing with --quiet."""

from __future__ import annotations

import io
import re
from pathlib import Path

from kb.progress import PLAIN_EVERY_S, Reporter


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_line_at_the_start_every_period_and_at_the_end() -> None:
    stream, clock = io.StringIO(), Clock()
    report = Reporter(stream, clock=clock, quiet_for_s=0)
    report("embed", 0, 100)
    for done in range(1, 100):
        clock.now += 0.5  # 2 chunks a second
        report("embed", done, 100)
    clock.now += 0.5
    report("embed", 100, 100)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "embed: 0/100"
    assert lines[-1] == "embed: 100/100 in 50s"
    periodic = lines[1:-1]
    assert PLAIN_EVERY_S == 10.0
    assert periodic == [f"embed: {n}/100 (2.0/s, about {(100 - n) // 2}s left)" for n in (20, 40, 60, 80)]
    assert "\r" not in stream.getvalue()


def test_a_terminal_gets_one_line_rewritten_in_place() -> None:
    stream, clock = Tty(), Clock()
    report = Reporter(stream, clock=clock, quiet_for_s=0)
    for done in range(0, 4):
        report("text index", done, 3)
        clock.now += 30
    out = stream.getvalue()
    assert out.count("\r\033[K") == 4 and out.endswith("text index: 3/3 in 1m30s\n")
    assert "\r\033[Ktext index: 1/3 (30.0s each, about 1m00s left)" in out
    assert out.count("\n") == 1


def test_a_new_stage_closes_the_previous_terminal_line() -> None:
    stream = Tty()
    report = Reporter(stream, clock=Clock(), quiet_for_s=0)
    report("embed", 1, 5)
    report("text index", 0, 5)
    assert stream.getvalue().count("\n") == 1


def test_a_quick_stage_prints_nothing_and_a_slow_one_speaks_once_it_is_slow() -> None:
    for stream in (io.StringIO(), Tty()):
        clock = Clock()
        report = Reporter(stream, clock=clock, quiet_for_s=1.0)
        report("read session files", 0, 1)
        clock.now += 0.2
        report("read session files", 1, 1)
        assert stream.getvalue() == ""
        report("embed", 0, 10)
        clock.now += 0.5
        report("embed", 1, 10)
        assert stream.getvalue() == ""
        clock.now += 1.0
        report("embed", 2, 10)
        clock.now += 1.0
        report("embed", 10, 10)
        out = stream.getvalue()
        assert "embed: 2/10 (1.3/s, about 6s left)" in out and out.endswith("embed: 10/10 in 2s\n")


def test_quiet_prints_nothing() -> None:
    stream = Tty()
    Reporter(stream, quiet=True)("embed", 1, 1)
    assert stream.getvalue() == ""


def test_index_build_reports_progress_to_a_log_and_quiet_silences_it(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KB_PROGRESS_AFTER", "0")  # this small build is quick: report it anyway
    root = tmp_path / "kb"
    cli("init", str(root))
    doc = tmp_path / "policy.md"
    doc.write_text("# Policy\n\nTrips are booked 14 days ahead.\n\nMeals are paid up to 40 euros a day.\n")
    assert cli("evidence", "add", str(doc), cwd=root).code == 0
    result = cli("index", "build")
    assert result.code == 0, result.err
    assert any(line.startswith("embed: ") and " in " in line for line in result.err.splitlines()), result.err
    quiet = cli("--quiet", "index", "build", "--full")
    assert quiet.code == 0 and quiet.err == ""


def test_check_and_run_report_progress_to_a_log(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KB_PROGRESS_AFTER", "0")
    root = tmp_path / "kb"
    cli("init", str(root))
    checked = cli("check", cwd=root)
    assert checked.code == 0, checked.err
    lines = checked.err.splitlines()
    assert lines[0].startswith("check ") and re.match(r"check \d+ pages: (\d+)/\1 rule families in ", lines[-1]), checked.err
    doc = tmp_path / "policy.md"
    doc.write_text("# Policy\n\nTrips are booked 14 days ahead.\n")
    assert cli("evidence", "add", str(doc)).code == 0
    ran = cli("run")  # the index build after the merge reports like `kb index build`
    assert ran.code == 0 and any(line.startswith("embed: ") for line in ran.err.splitlines()), ran.err
    assert cli("--quiet", "check").err == ""


def test_the_ticker_writes_on_time_while_the_work_reports_nothing() -> None:
    import time

    stream = io.StringIO()
    report = Reporter(stream, quiet_for_s=0, every_s=0.2, tick=True)  # the real clock
    report("embed", 0, 10, "chunks")
    time.sleep(1.1)  # one long model call: no report from the work
    report("embed", 10, 10, "chunks")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "embed: 0/10 chunks" and lines[-1].startswith("embed: 10/10 chunks in ")
    assert len([line for line in lines[1:-1] if line.startswith("embed: 0/10 chunks [")]) >= 3, lines


def test_a_replaced_reporter_stops_its_timer_and_never_writes_again() -> None:
    """A command that fails mid-stage leaves its stage open; the next command's reporter
    replaces it, and the old timer must not write into the new command's stderr."""
    import io
    import time as _time

    from kb.progress import Reporter, set_reporter

    old_stream = io.StringIO()
    old = Reporter(stream=old_stream, tick=True, quiet_for_s=0.0, every_s=0.1)
    set_reporter(old)
    old("read session files", 0, 1)
    _time.sleep(0.35)
    assert old_stream.getvalue().count("read session files") >= 2  # the timer wrote on time
    set_reporter(Reporter(quiet=True))
    _time.sleep(0.1)
    written = old_stream.getvalue()
    _time.sleep(0.4)
    assert old_stream.getvalue() == written
    assert old._ticker is None or not old._ticker.is_alive()
