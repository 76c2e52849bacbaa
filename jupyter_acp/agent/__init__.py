"""The built-in ACP agent (stdio). Never imported by the server: it runs in its own process."""
