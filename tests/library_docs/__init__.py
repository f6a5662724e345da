"""docs/library.md's Python blocks, each as a file, so that the project's `mypy --strict` and ruff check them
(tests/test_library_docs_typed.py keeps them equal to the page; decision 455)."""
