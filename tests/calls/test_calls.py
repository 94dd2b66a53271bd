from livebridge import Call, Outcome, Recorder
from livebridge.calls.observers import BatchStarted, Observer, emit


def test_outcome_error_flag() -> None:
    ok = Outcome("c1", "f", "ok", {"output": 1})
    bad = Outcome("c2", "f", "error", {"error": {"type": "ValueError"}})
    assert not ok.is_error
    assert bad.is_error


def test_call_defaults_to_empty_args() -> None:
    assert Call("c1", "f").args == {}


class _Broken:
    def on_event(self, event: object) -> None:
        raise RuntimeError("observer bug")


def test_emit_isolates_failing_observers() -> None:
    recorder = Recorder()
    observers: list[Observer] = [_Broken(), recorder]
    emit(observers, BatchStarted(None, 0, 3))
    assert recorder.of(BatchStarted) == [BatchStarted(None, 0, 3)]


def test_the_vocabulary_is_defined_once() -> None:
    from livebridge.calls.call import BEHAVIORS, DEDUP_REASONS, SCHEDULINGS
    from livebridge.calls.endings import OUTCOME_KINDS, is_failure

    assert BEHAVIORS == ("BLOCKING", "NON_BLOCKING")
    assert SCHEDULINGS == ("SILENT", "WHEN_IDLE", "INTERRUPT")
    assert DEDUP_REASONS == ("twin", "reissue", "key", "journal")
    assert [k for k in OUTCOME_KINDS if is_failure(k)] == [
        "error",
        "timeout",
        "cancelled",
        "rejected",
    ]
