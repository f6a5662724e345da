"""`python -m klaw` runs the same command line as the `klaw` script."""

from klaw.cli import main

if __name__ == "__main__":
    main()
