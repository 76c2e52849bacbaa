"""HTTP and WebSocket routes: thin handlers over the session hub, authorized by resource and action."""
