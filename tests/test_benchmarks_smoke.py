import pytest

from benchmarks import bench_dispatch


def test_bench_dispatch_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_dispatch.main(["--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| batch size | asyncio.gather µs/call | Dispatcher.run µs/call")
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["1", "8", "64"]
    assert all(line.rstrip().endswith("x |") for line in lines[2:])
