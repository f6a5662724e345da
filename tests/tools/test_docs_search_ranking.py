"""`docs_search` over the docs klaw ships, asked as a person would ask: the section that answers comes first.

lows23: "how do I back up my home" ranked the reindex section above the backup one. The index weighed a
section by the page title every section of the page shares ("Maintenance: … `klaw reindex`; backing up,
restoring …"), a long section's pieces each alone (the question's words in different paragraphs of it),
and "backup" never met the docs' "back up". Full text alone here (no embedder): the part of the ranking
that is klaw's own method; the vectors are fused on top of it (decision 431)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from klaw.tools.docs.bundle import DocsBundle
from klaw.tools.docs.index import DocsIndex

BACKUP = ("maintenance.md", "Back up, restore and upgrade a home")
QUESTIONS = [
    ("how do I back up my home", BACKUP),
    ("backup KLAW_HOME", BACKUP),  # before: PostgreSQL's page, then the reindex section
    ("restore klaw from a backup", BACKUP),  # before: the reindex section ("--keep-backup" four times)
    ("what should I copy to back up klaw", BACKUP),
    ("how do I upgrade klaw to a newer version", BACKUP),
    ("what happens when a scheduled run is missed", ("scheduled-tasks.md", "Timing, misfires and overlap")),
    ("how do I make the agent forget something", ("memory/forgetting.md", "In the chat: /forget")),
    ("how do I write a skill", ("skills.md", "Writing a skill")),
    ("schedule a task every morning", ("scheduled-tasks.md", "Creating tasks")),
]


async def test_paraphrased_questions_find_the_section_that_answers_them(tmp_path: Path) -> None:
    index = DocsIndex(tmp_path / "docs_index.db", DocsBundle.shipped(), None)
    wrong = []
    for question, (path, heading) in QUESTIONS:
        best = (await index.search(question, 5))[0]
        if best.path != path or not best.heading.endswith(f" — {heading}"):
            wrong.append(f"{question!r}: {best.path} | {best.heading}")
    assert not wrong, "\n".join(wrong)


def test_two_words_are_found_as_the_one_word_a_person_writes() -> None:
    from klaw.tools.docs.index import joined_pairs

    assert joined_pairs("Back up the home, then set up") == "backup upthe thehome homethen thenset setup"


async def test_an_index_of_the_old_layout_is_built_again(tmp_path: Path) -> None:
    file = tmp_path / "docs_index.db"
    with sqlite3.connect(file) as old:  # the layout before decision 431
        old.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE sections (id INTEGER PRIMARY KEY, path TEXT NOT NULL, heading TEXT NOT NULL,"
            " text TEXT NOT NULL, vector BLOB);"
            "CREATE VIRTUAL TABLE sections_fts USING fts5 (heading, text, content = 'sections', content_rowid = 'id');"
            "INSERT INTO meta VALUES ('fingerprint', 'old'), ('embedder', 'none');"
        )
    old.close()
    hits = await DocsIndex(file, DocsBundle.shipped(), None).search("how do I back up my home", 1)
    assert hits[0].path == BACKUP[0] and hits[0].heading.endswith(BACKUP[1])
