"""The command line: argument parsing and one handler per command."""
