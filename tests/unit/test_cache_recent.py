"""What this process stored lately is read back without opening its file again (``cache.RECENT``);
the rest comes from the store, and the memory stays within its budget."""

import json

from argus_dagster.infra import cache as cache_lib
from argus_dagster.infra.cache import ContentCache, LocalStore


class CountingStore(LocalStore):
    def __init__(self, root):
        super().__init__(root)
        self.reads = 0

    def read(self, name):
        self.reads += 1
        return super().read(name)


def test_a_value_stored_here_is_read_back_without_opening_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_lib, "RECENT", cache_lib._Recent(32 * 2**20))
    store = CountingStore(tmp_path)
    writer, reader = ContentCache(store, "judgments"), ContentCache(store, "judgments")  # two steps' caches
    writer.put("k" * 64, {"score": 7})
    value, hit = reader.get_or_compute("k" * 64, lambda: {"score": 0})
    assert (value, hit, store.reads) == ({"score": 7}, True, 0)
    # stored by another process (straight into the folder): read from the store
    path = tmp_path / "judgments" / "ab" / ("ab" * 32 + ".json")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"score": 3}))
    assert reader.get_or_compute("ab" * 32, lambda: {"score": 0}) == ({"score": 3}, True)
    assert store.reads == 1


def test_the_memory_keeps_to_its_budget_and_leaves_large_entries_to_the_store(tmp_path, monkeypatch):
    recent = cache_lib._Recent(1000)
    monkeypatch.setattr(cache_lib, "RECENT", recent)
    store = CountingStore(tmp_path)
    c = ContentCache(store, "evidence")
    for i in range(20):  # about 110 bytes each: the oldest go
        c.put(f"{i:064d}", {"i": i, "pad": "x" * 90})
    assert recent._size <= 1000
    assert c.get(f"{19:064d}")["i"] == 19 and store.reads == 0
    assert c.get(f"{0:064d}")["i"] == 0 and store.reads == 1  # evicted: from the store
    c.put("f" * 64, {"big": "y" * 70_000})
    assert c.get("f" * 64)["big"] == "y" * 70_000 and store.reads == 2
