from klaw import ToolFunction, ToolSetup


def provide(setup: ToolSetup) -> list[ToolFunction]:
    notes = setup.home.workspace / "notes.txt"

    async def note_write(text: str) -> str:
        """Add a line to the person's notes."""
        with notes.open("a", encoding="utf-8") as file:
            file.write(text + "\n")
        return "noted"

    setup.registry.note_unavailable("note_sync", "no sync server set")  # shown by /status
    return [note_write]
