"""One module per command (or family of commands): its arguments and its handler.
`cli.command_table` lists them; `errorflow --help` imports none of them."""
