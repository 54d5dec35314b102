def test_ids_take_ascii_digits_only() -> None:
    import re

    from boxmaker.memoryd.items.store import is_item_id
    from boxmaker.memoryd.withdrawal.records import is_archive_ref, is_withdrawal_id, parse_anchor
    from boxmaker.proto import ids

    arabic = "\u0660\u0660\u0661"
    assert not is_item_id(f"mem-2026-11-29-{arabic}")
    assert is_item_id("mem-2026-11-29-001")
    assert not is_withdrawal_id(f"memwd-2026-11-29-{arabic}")
    assert not is_archive_ref(f"archive/2026-11-29.md#mem-2026-11-29-{arabic}")
    assert parse_anchor(f"sessions/chat-a/0.jsonl#{arabic}") is None
    assert re.match(ids.EDIT_ID_PATTERN, f"2026-09-24-{arabic}0") is None
    assert re.match(ids.PENDING_ID_PATTERN, f"p-2026-09-24-{arabic}0") is None
