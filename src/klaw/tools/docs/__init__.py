"""The docs tools: klaw's own user documentation, shipped inside the package, listed, read and searched."""
