"""Owner views that read the same everywhere (issue 18): identity entries in the owner's search match
words, not letters, and keep to -k; recall names the scheduler and jobs as speakers, never the owner."""

from __future__ import annotations

from boxmaker.memoryd.index.hits import speaker_words
from boxmaker.memoryd.index.recall import starts_a_word
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def test_identity_entries_match_words_not_letters() -> None:
    assert starts_a_word("Deploys on Thursdays.", ("deploy",))
    assert not starts_a_word("Prefers answers in UTC.", ("o",))
    assert not starts_a_word("Prefers answers in UTC.", ("swer",))


def test_the_owners_search_keeps_identity_hits_to_k(service: object) -> None:
    for text in ("Deploys on Thursdays.", "Deploys to atlas.", "Deploys at noon."):
        reply = service.handle(
            "memory_admin", MemoryAdmin(command="add", args={"file": "user", "text": text})
        )  # type: ignore[attr-defined]
        assert reply.data["code"] == "ok"
    found = service.handle("memory_admin", MemoryAdmin(command="search", arg="deploys", args={"k": 1}))  # type: ignore[attr-defined]
    assert isinstance(found, MemoryAdminReply)
    assert [h["tag"] for h in found.data["hits"]].count("identity") == 1
    letters = service.handle("memory_admin", MemoryAdmin(command="search", arg="o", args={"k": 5}))  # type: ignore[attr-defined]
    assert [h["tag"] for h in letters.data["hits"]].count("identity") == 0


def test_recall_names_the_scheduler_and_jobs() -> None:
    assert speaker_words("") == "the owner"
    assert speaker_words("scheduler") == "the scheduler"
    assert speaker_words("job:morning") == "the job morning"
    assert speaker_words("Caroline") == "Caroline"
