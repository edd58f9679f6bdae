"""Process-wide objects per configuration: built once, even when many threads ask at the same time."""

import threading

import pytest

from argus_dagster.infra.memo import once_per_key


def test_concurrent_first_calls_build_one_object():
    builds = []
    asking = threading.Semaphore(0)  # released by each thread as it calls build()

    @once_per_key(maxsize=4)
    def build(name: str) -> object:
        builds.append(name)
        if len(builds) == 1:  # the first build ends only once every thread has asked: all miss at once
            for _ in range(12):
                assert asking.acquire(timeout=30)
        return object()

    barrier = threading.Barrier(12)
    got: list[object] = []

    def ask() -> None:
        barrier.wait()
        asking.release()
        got.append(build("judge"))

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == ["judge"]
    assert len({id(o) for o in got}) == 1
    assert build("judge") is got[0] and build("other") is not got[0]


def test_a_failed_build_is_not_stored_and_old_entries_make_room():
    calls = []

    @once_per_key(maxsize=2)
    def build(name: str) -> str:
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("endpoint down")
        return name.upper()

    with pytest.raises(RuntimeError):
        build("a")
    assert build("a") == "A" and build("a") == "A" and calls == ["a", "a"]
    build("b"), build("c")  # "a" is the least recently used: dropped
    assert build("a") == "A" and calls == ["a", "a", "b", "c", "a"]
