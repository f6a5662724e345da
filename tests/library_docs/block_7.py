from klaw import ToolFunction, ToolSetup, private_open


def provide(setup: ToolSetup) -> list[ToolFunction]:
    notes = setup.home.workspace / "notes.txt"

    async def note_write(text: str) -> str:
        """Add a line to the person's notes."""
        with private_open(notes, "a") as file:  # created 0600, as klaw's own files, whatever the umask
            file.write(text + "\n")
        return "noted"

    # shown by /status, /tools and `klaw tools`, with what to do
    setup.registry.note_unavailable("note_sync", "no sync server set", fix="set NOTES_SYNC_URL, then restart klaw")
    return [note_write]
