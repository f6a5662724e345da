from klaw import ToolFunction, ToolSetup


def provide(setup: ToolSetup) -> list[ToolFunction]:
    notes = setup.home.workspace / "notes.txt"

    async def note_write(text: str) -> str:
        """Add a line to the person's notes."""
        with notes.open("a", encoding="utf-8") as file:
            file.write(text + "\n")
        return "noted"

    # shown by /status, /tools and `klaw tools`, with what to do
    setup.registry.note_unavailable("note_sync", "no sync server set", fix="set NOTES_SYNC_URL, then restart klaw")
    return [note_write]
